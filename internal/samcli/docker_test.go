package samcli

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// bridgeInspect is `GET /networks/bridge` as Docker 20.10.24 (Debian 12's
// docker.io) answers it: no Gateway, only the subnet and the bridge's name.
var bridgeInspect = readFile("testdata/docker/networks-bridge-20.10.json")

// networkWithGateway is a user-defined network's answer: IPAM names the
// gateway.
const networkWithGateway = `{"Name":"linegate","IPAM":{"Driver":"default","Config":[{"Subnet":"172.18.0.0/16","Gateway":"172.18.0.1"}]},"Options":{}}`

func readFile(name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// fakeDaemon serves handler on a unix socket, as dockerd does, and returns
// its DOCKER_HOST.
func fakeDaemon(t *testing.T, handler http.Handler) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "dkr")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "d.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(handler)
	srv.Listener = l
	srv.Start()
	t.Cleanup(srv.Close)
	return "unix://" + sock
}

func TestDockerPingAndBridge(t *testing.T) {
	ctx := context.Background()
	healthy := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/_ping":
			w.Write([]byte("OK"))
		case "/networks/bridge":
			w.Write([]byte(networkWithGateway))
		default:
			http.NotFound(w, r)
		}
	}))
	d, err := NewDocker(healthy)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	gw, err := d.BridgeGateway(ctx)
	if err != nil || gw != netip.MustParseAddr("172.18.0.1") {
		t.Fatalf("BridgeGateway = %v, %v; want 172.18.0.1", gw, err)
	}
	for goos, want := range map[string]string{"linux": "172.18.0.1:3000", "darwin": "127.0.0.1:3000", "windows": "127.0.0.1:3000"} {
		if got, err := RelayAddress(ctx, d, goos, 3000); err != nil || got != want {
			t.Errorf("RelayAddress(%s) = %s, %v; want %s", goos, got, err, want)
		}
	}

	t.Run("a daemon that errs", func(t *testing.T) {
		broken := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "starting", http.StatusServiceUnavailable)
		}))
		d, err := NewDocker(broken)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Ping(ctx); !errors.Is(err, ErrNoDocker) || !strings.Contains(err.Error(), "503") {
			t.Errorf("Ping = %v, want ErrNoDocker naming the 503", err)
		}
		if _, err := RelayAddress(ctx, d, "linux", 3000); !errors.Is(err, ErrNoDocker) {
			t.Errorf("RelayAddress = %v, want ErrNoDocker", err)
		}
	})
	t.Run("something else on the socket", func(t *testing.T) {
		other := fakeDaemon(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("hello")) }))
		d, _ := NewDocker(other)
		if err := d.Ping(ctx); !errors.Is(err, ErrNoDocker) {
			t.Errorf("Ping = %v, want ErrNoDocker", err)
		}
	})
	t.Run("no daemon", func(t *testing.T) {
		d, err := NewDocker("unix://" + filepath.Join(t.TempDir(), "none.sock"))
		if err != nil {
			t.Fatal(err)
		}
		if err := d.Ping(ctx); !errors.Is(err, ErrNoDocker) {
			t.Errorf("Ping = %v, want ErrNoDocker", err)
		}
	})
	t.Run("DOCKER_HOST values", func(t *testing.T) {
		for host, ok := range map[string]bool{"tcp://127.0.0.1:2375": true, "unix:///var/run/docker.sock": true, "ssh://me@box": false, "npipe:////./pipe/docker_engine": false, "%zz": false} {
			if _, err := NewDocker(host); (err == nil) != ok {
				t.Errorf("NewDocker(%q) = %v, want ok=%v", host, err, ok)
			}
		}
		t.Setenv("DOCKER_HOST", healthy)
		d, err := NewDocker("")
		if err != nil || d.Ping(ctx) != nil {
			t.Errorf("NewDocker(\"\") does not use $DOCKER_HOST: %v", err)
		}
	})
}

func TestParseNetwork(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     Network // zero: an error
	}{
		{"docker 20.10's default bridge", bridgeInspect, Network{Name: "bridge", Subnet: netip.MustParsePrefix("172.17.0.0/16"), Interface: "docker0"}},
		{"a gateway", networkWithGateway, Network{Name: "linegate", Gateway: netip.MustParseAddr("172.18.0.1"), Subnet: netip.MustParsePrefix("172.18.0.0/16")}},
		{"IPv6 first", `{"Name":"b","IPAM":{"Config":[{"Subnet":"fd00::/64","Gateway":"fd00::1"},{"Subnet":"10.9.0.0/24","Gateway":"10.9.0.1"}]}}`,
			Network{Name: "b", Gateway: netip.MustParseAddr("10.9.0.1"), Subnet: netip.MustParsePrefix("10.9.0.0/24")}},
		{"neither gateway nor interface", `{"Name":"bridge","IPAM":{"Config":[{"Subnet":"172.17.0.0/16"}]}}`, Network{}},
		{"unspecified gateway", `{"Name":"bridge","IPAM":{"Config":[{"Gateway":"0.0.0.0"}]}}`, Network{}},
		{"not JSON", `<html>`, Network{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseNetwork([]byte(tc.in))
			if tc.want == (Network{}) {
				if err == nil {
					t.Fatalf("= %+v, want an error", got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("= %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

// Without a gateway in its answer, the bridge's address is its interface's
// on this machine, within its subnet.
func TestNetworkGatewayFromTheInterface(t *testing.T) {
	n, err := ParseNetwork([]byte(bridgeInspect))
	if err != nil {
		t.Fatal(err)
	}
	addrs := func(list ...string) func(string) ([]net.Addr, error) {
		return func(name string) ([]net.Addr, error) {
			if name != "docker0" {
				return nil, errors.New("no such network interface")
			}
			var out []net.Addr
			for _, s := range list {
				ip, ipn, err := net.ParseCIDR(s)
				if err != nil {
					t.Fatal(err)
				}
				ipn.IP = ip
				out = append(out, ipn)
			}
			return out, nil
		}
	}
	if gw, err := n.gateway(addrs("fe80::42:ddff:fe35:c3f8/64", "10.0.0.5/8", "172.17.0.1/16")); err != nil || gw.String() != "172.17.0.1" {
		t.Errorf("gateway = %v, %v; want 172.17.0.1, the address in the subnet", gw, err)
	}
	if _, err := n.gateway(addrs("fe80::1/64")); err == nil || !strings.Contains(err.Error(), "no IPv4 address") {
		t.Errorf("a bridge with no IPv4 address: %v", err)
	}
	n.Interface = "docker9"
	if _, err := n.gateway(addrs()); err == nil || !strings.Contains(err.Error(), "docker9") {
		t.Errorf("a missing bridge interface: %v", err)
	}
}

// FuzzParseNetwork: the daemon's answer is outside input; a success names a
// usable IPv4 gateway or an interface.
func FuzzParseNetwork(f *testing.F) {
	f.Add([]byte(bridgeInspect))
	f.Add([]byte(networkWithGateway))
	f.Add([]byte(`{"IPAM":{"Config":[{"Gateway":"::ffff:1.2.3.4","Subnet":"::ffff:1.2.3.0/120"}]}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := ParseNetwork(b)
		if err != nil {
			return
		}
		if n.Gateway.IsValid() && (!n.Gateway.Is4() || n.Gateway.IsUnspecified()) || !n.Gateway.IsValid() && n.Interface == "" {
			t.Fatalf("accepted %+v from %q", n, b)
		}
		if n.Subnet.IsValid() && !n.Subnet.Addr().Is4() {
			t.Fatalf("an IPv6 subnet: %+v", n)
		}
	})
}
