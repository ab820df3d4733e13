package samcli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"
)

// ErrNoDocker means no Docker daemon answers at DOCKER_HOST (or Docker's
// default socket): sam local invoke cannot run a function.
var ErrNoDocker = errors.New("no Docker daemon answers")

// DefaultDockerHost is where Docker's client looks without DOCKER_HOST.
const DefaultDockerHost = "unix:///var/run/docker.sock"

// Docker is a minimal client of the Docker Engine API: enough to tell
// whether a daemon runs and where its containers reach the host.
type Docker struct {
	base   string // http://docker or the tcp daemon's URL
	client *http.Client
}

// NewDocker returns a client of the daemon at host, a DOCKER_HOST value
// (unix:///path or tcp://host:port); "" is $DOCKER_HOST, else
// DefaultDockerHost.
func NewDocker(host string) (*Docker, error) {
	if host == "" {
		host = os.Getenv("DOCKER_HOST")
	}
	if host == "" {
		host = DefaultDockerHost
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("DOCKER_HOST %q: %w", host, err)
	}
	switch u.Scheme {
	case "unix":
		path := u.Path
		tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		}}
		return &Docker{base: "http://docker", client: &http.Client{Transport: tr, Timeout: 10 * time.Second}}, nil
	case "tcp", "http":
		return &Docker{base: "http://" + u.Host, client: &http.Client{Timeout: 10 * time.Second}}, nil
	default:
		return nil, fmt.Errorf("DOCKER_HOST %q: only unix:// and tcp:// (without TLS) are supported here", host)
	}
}

// get reads path from the Engine API into at most 1 MiB.
func (d *Docker) get(ctx context.Context, path string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, d.base+path, nil)
	if err != nil {
		return nil, err
	}
	resp, err := d.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoDocker, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("%w: GET %s: %v", ErrNoDocker, path, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: GET %s: %s: %s", ErrNoDocker, path, resp.Status, snippet(b))
	}
	return b, nil
}

// Ping checks the daemon answers (GET /_ping is "OK"); the error wraps
// ErrNoDocker.
func (d *Docker) Ping(ctx context.Context) error {
	b, err := d.get(ctx, "/_ping")
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(b)) != "OK" {
		return fmt.Errorf("%w: /_ping answered %q", ErrNoDocker, snippet(b))
	}
	return nil
}

// BridgeGateway is the host's address on Docker's default bridge network
// (usually 172.17.0.1): what `--add-host NAME:host-gateway` maps NAME to on
// Linux unless the daemon sets host-gateway-ip. The daemon names it in the
// network's IPAM config, or (Docker 20.10's default bridge) names only the
// bridge's interface (docker0), whose IPv4 address on this machine is then
// the gateway.
func (d *Docker) BridgeGateway(ctx context.Context) (netip.Addr, error) {
	b, err := d.get(ctx, "/networks/bridge")
	if err != nil {
		return netip.Addr{}, err
	}
	n, err := ParseNetwork(b)
	if err != nil {
		return netip.Addr{}, err
	}
	return n.gateway(interfaceAddrs)
}

// Network is what ParseNetwork reads of a Docker network.
type Network struct {
	Name string
	// Gateway is the IPAM config's first IPv4 gateway; invalid when the
	// daemon names none.
	Gateway netip.Addr
	// Subnet is the IPAM config's first IPv4 subnet (invalid if none).
	Subnet netip.Prefix
	// Interface is the bridge's network interface on the host
	// (com.docker.network.bridge.name), or "".
	Interface string
}

// ParseNetwork reads a Docker network from the Engine API's network inspect
// JSON (GET /networks/bridge). It fails unless the answer names a gateway or
// a bridge interface.
func ParseNetwork(b []byte) (Network, error) {
	var n struct {
		Name string
		IPAM struct {
			Config []struct{ Subnet, Gateway string }
		}
		Options map[string]string
	}
	if err := json.Unmarshal(b, &n); err != nil {
		return Network{}, fmt.Errorf("docker network inspect: %w", err)
	}
	out := Network{Name: n.Name, Interface: n.Options["com.docker.network.bridge.name"]}
	for _, c := range n.IPAM.Config {
		if a, err := netip.ParseAddr(c.Gateway); err == nil && a.Is4() && !a.IsUnspecified() && !out.Gateway.IsValid() {
			out.Gateway = a
		}
		if p, err := netip.ParsePrefix(c.Subnet); err == nil && p.Addr().Is4() && !out.Subnet.IsValid() {
			out.Subnet = p.Masked()
		}
	}
	if !out.Gateway.IsValid() && out.Interface == "" {
		return Network{}, fmt.Errorf("docker network %q names neither an IPv4 gateway nor a bridge interface", n.Name)
	}
	return out, nil
}

// interfaceAddrs is the addresses of the host's interface name.
func interfaceAddrs(name string) ([]net.Addr, error) {
	ifc, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	return ifc.Addrs()
}

// gateway is n's gateway, or else the IPv4 address of its interface (within
// its subnet, when it names one), looked up with addrs.
func (n Network) gateway(addrs func(string) ([]net.Addr, error)) (netip.Addr, error) {
	if n.Gateway.IsValid() {
		return n.Gateway, nil
	}
	list, err := addrs(n.Interface)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("docker network %q: its bridge %s: %w", n.Name, n.Interface, err)
	}
	for _, a := range list {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		ip, ok := netip.AddrFromSlice(ipn.IP)
		if !ok {
			continue
		}
		ip = ip.Unmap()
		if ip.Is4() && (!n.Subnet.IsValid() || n.Subnet.Contains(ip)) {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("docker network %q: its bridge %s has no IPv4 address in %v on this machine", n.Name, n.Interface, n.Subnet)
}

// RelayAddress is where a relay must listen so that a container's
// host.docker.internal:port reaches this machine, given samconfig.toml's
// host.docker.internal:host-gateway mapping: on Linux the default bridge's
// gateway (asked of the daemon), elsewhere (Docker Desktop, which forwards
// host.docker.internal to the host's loopback) 127.0.0.1.
func RelayAddress(ctx context.Context, d *Docker, goos string, port int) (string, error) {
	if goos != "linux" {
		return netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 0, 0, 1}), uint16(port)).String(), nil
	}
	gw, err := d.BridgeGateway(ctx)
	if err != nil {
		return "", err
	}
	return netip.AddrPortFrom(gw, uint16(port)).String(), nil
}
