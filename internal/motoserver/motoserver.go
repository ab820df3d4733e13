// Package motoserver starts moto_server, an AWS API emulator, for tests that
// must talk to a real AWS wire protocol (DynamoDB conditional writes, SQS,
// EventBridge, SNS, SSM) without an AWS account.
//
// Where moto_server is not installed the tests that need it are skipped with a
// loud message on a developer machine, and fail when CI=true: CI must run them.
package motoserver

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
)

// Region is the region every moto-backed test uses.
const Region = "us-east-1"

// Start launches moto_server on a free loopback port and returns its endpoint
// URL (http://127.0.0.1:PORT). The server is stopped when the test ends. Each
// call starts a fresh server, so tests never see each other's resources.
func Start(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("moto_server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("moto_server is required in CI but not on PATH: %v", err)
		}
		t.Skip("SKIPPED LOUDLY: moto_server not installed; this test runs against moto in CI (Debian: pipx install 'moto[server]', see README)")
	}
	port, err := freePort()
	if err != nil {
		t.Fatalf("find a free port: %v", err)
	}
	cmd := exec.Command(bin, "-H", "127.0.0.1", "-p", fmt.Sprint(port))
	cmd.Env = append(os.Environ(), "MOTO_ALLOW_NONEXISTENT_REGION=true")
	var out lockedBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start moto_server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	endpoint := fmt.Sprintf("http://127.0.0.1:%d", port)
	// moto_server imports every service's model before it answers: seconds
	// on an idle machine, tens of seconds on a loaded one (it missed 30 s at
	// a load average of 20 on 2 cores). The wait ends on its answer, or on
	// its exit, with its output.
	deadline := time.Now().Add(startWait)
	for {
		resp, err := http.Get(endpoint + "/moto-api/")
		if err == nil {
			resp.Body.Close()
			return endpoint
		}
		select {
		case werr := <-exited:
			exited <- werr // for the cleanup
			t.Fatalf("moto_server exited before it answered on %s (%v):\n%s", endpoint, werr, out.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("moto_server did not answer on %s within %v: %v\n%s", endpoint, startWait, err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// startWait bounds how long Start waits for moto_server to answer.
const startWait = 2 * time.Minute

// lockedBuffer is moto_server's output, kept for a failure message.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 64<<10 {
		return len(p), nil // enough for a failure message
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Config returns an AWS config that sends every client to endpoint with
// static test credentials. Clients built from it need no other setup.
func Config(endpoint string) aws.Config {
	return aws.Config{
		Region:       Region,
		Credentials:  credentials.NewStaticCredentialsProvider("testing", "testing", ""),
		BaseEndpoint: aws.String(endpoint),
	}
}

// Reset wipes all of moto's state, for tests that share one server.
func Reset(ctx context.Context, endpoint string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint+"/moto-api/reset", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("reset moto: %w", err)
	}
	resp.Body.Close()
	return nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
