package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/local"
	"github.com/linegate/linegate/internal/signature"
)

func runCLI(args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := run(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{}, {"nope"}, {"sign"}, {"send"}, {"send", "--text", "a", "--event", "follow"}, {"send", "--event", "dance"},
		{"redrive"}, {"local", "--time-scale", "0"},
		{"replay", "--since", "2025-03-10T09:30:00Z", "--until", "2025-03-10T10:00:00Z", "--rules", " , "},
	} {
		if code, _, _ := runCLI(args...); code != 2 {
			t.Errorf("linegate %v exited %d, want 2", args, code)
		}
	}
}

func TestSign(t *testing.T) {
	f := filepath.Join(t.TempDir(), "body.json")
	body := []byte(`{"events":[]}`)
	if err := os.WriteFile(f, body, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, _ := runCLI("sign", "--secret", "s3cret", f)
	if code != 0 || strings.TrimSpace(out) != signature.Sign([]byte("s3cret"), body) {
		t.Fatalf("exit %d, out %q", code, out)
	}
}

// send signs what it posts: the receiving end verifies with the same secret.
func TestSendSignsWhatItPosts(t *testing.T) {
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !signature.Verify(body, r.Header.Get(signature.Header), []byte("s3cret")) {
			w.WriteHeader(401)
			return
		}
		got = append(got, string(body))
		w.Write([]byte(`{"accepted":1}`))
	}))
	defer srv.Close()
	for _, args := range [][]string{{"--text", "hi there"}, {"--event", "follow"}, {"--event", "postback", "--data", "a=1"}, {"--event", "unfollow"}} {
		code, out, errOut := runCLI(append([]string{"send", "--url", srv.URL, "--secret", "s3cret"}, args...)...)
		if code != 0 || !strings.HasPrefix(out, "200 OK in ") {
			t.Fatalf("send %v: exit %d, out %q, err %q", args, code, out, errOut)
		}
	}
	if len(got) != 4 || !strings.Contains(got[0], `"text":"hi there"`) || !strings.Contains(got[2], `"data":"a=1"`) {
		t.Fatalf("bodies %q", got)
	}
	code, _, _ := runCLI("send", "--url", srv.URL, "--secret", "wrong", "--text", "x")
	if code != 1 {
		t.Fatalf("a refused send exited %d, want 1", code)
	}
}

// -h and --help print usage and exit 0, for the CLI and every command.
func TestHelpExitsZero(t *testing.T) {
	code, out, _ := runCLI("--help")
	if code != 0 || !strings.Contains(out, "usage: linegate") {
		t.Fatalf("linegate --help: exit %d, stdout %q", code, out)
	}
	for name := range commands {
		for _, flag := range []string{"-h", "--help"} {
			code, out, errOut := runCLI(name, flag)
			if code != 0 || !strings.Contains(out+errOut, "-") || strings.Contains(errOut, "help requested") {
				t.Errorf("linegate %s %s: exit %d, out %q, err %q; want usage and exit 0", name, flag, code, out, errOut)
			}
		}
	}
}

// With no server, send prints no made-up status line, only the error and a
// hint; a 401 says the secret is the likely cause.
func TestSendErrorsSayWhatToDo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String() + "/webhook"
	ln.Close()
	refuse := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(401) }))
	defer refuse.Close()
	body := filepath.Join(t.TempDir(), "body.json")
	if err := os.WriteFile(body, []byte(`{"events":[]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		stdout  string // "" means nothing at all
		errWant string
	}{
		{"no server", []string{"send", "--url", closed, "--text", "hi"}, "", "is linegate local running"},
		{"no server, raw file", []string{"send", "--url", closed, "--file", body}, "", "is linegate local running"},
		{"401", []string{"send", "--url", refuse.URL, "--text", "hi"}, "401 Unauthorized", "--secret"},
		{"401, raw file", []string{"send", "--url", refuse.URL, "--file", body}, "401 Unauthorized", "--secret"},
	}
	for _, tt := range tests {
		code, out, errOut := runCLI(tt.args...)
		if code != 1 || !strings.Contains(errOut, tt.errWant) || (tt.stdout == "" && out != "") || !strings.Contains(out, tt.stdout) {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want exit 1, stdout with %q, stderr with %q", tt.name, code, out, errOut, tt.stdout, tt.errWant)
		}
	}
}

// sign needs no secret for linegate local: its default is local's.
func TestSignDefaultsToTheLocalSecret(t *testing.T) {
	t.Setenv("LINE_CHANNEL_SECRET", "")
	f := filepath.Join(t.TempDir(), "body.json")
	body := []byte(`{"events":[]}`)
	if err := os.WriteFile(f, body, 0o600); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI("sign", f)
	if code != 0 || strings.TrimSpace(out) != signature.Sign([]byte(local.DefaultSecret), body) {
		t.Fatalf("exit %d, out %q, err %q", code, out, errOut)
	}
}

// linegate local explains its start-up failures: no template here, a port
// in use, an address beyond loopback.
func TestLocalStartErrorsSayWhatToDo(t *testing.T) {
	tmpl, err := filepath.Abs("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	t.Chdir(t.TempDir())
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"outside the repository", []string{"local"}, "--template"},
		{"port in use", []string{"local", "--template", tmpl, "--addr", busy.Addr().String()}, "--addr"},
		{"beyond loopback", []string{"local", "--template", tmpl, "--addr", "0.0.0.0:0"}, "--allow-remote"},
	}
	for _, tt := range tests {
		code, _, errOut := runCLI(tt.args...)
		if code != 1 || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 and a hint naming %s", tt.name, code, errOut, tt.want)
		}
	}
}

// `linegate local` without --addr listens on loopback only: its default is
// local.DefaultAddr, which is a loopback address (internal/local tests it).
func TestLocalDefaultAddrIsLoopback(t *testing.T) {
	fs := flag.NewFlagSet("local", flag.ContinueOnError)
	localCommand(fs)
	f := fs.Lookup("addr")
	if f == nil || f.DefValue != local.DefaultAddr {
		t.Fatalf("--addr default %v, want local.DefaultAddr %q", f, local.DefaultAddr)
	}
	host, _, err := net.SplitHostPort(f.DefValue)
	if ip := net.ParseIP(host); err != nil || ip == nil || !ip.IsLoopback() {
		t.Fatalf("--addr default %q is not a loopback IP address", f.DefValue)
	}
}
