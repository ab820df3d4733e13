package samcli

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files in testdata/invoke are stdout and stderr of real `sam local
// invoke` runs (SAM CLI 1.164.0, the arm64 functions under QEMU): every one
// exited 0, whatever the function did.
func readCase(t testing.TB, name string) (stdout, stderr []byte) {
	t.Helper()
	var err error
	if stdout, err = os.ReadFile(filepath.Join("testdata", "invoke", name+".stdout")); err != nil {
		t.Fatal(err)
	}
	if stderr, err = os.ReadFile(filepath.Join("testdata", "invoke", name+".stderr")); err != nil {
		t.Fatal(err)
	}
	return stdout, stderr
}

func TestParseInvocation(t *testing.T) {
	for _, tc := range []struct {
		name     string
		wantErr  error  // nil: a normal answer
		wantText string // in the error, or in the response
	}{
		{"webhook-ok", nil, `"statusCode": 200`},
		{"worker-poison", nil, `"itemIdentifier": "0e5f7a2c-3b4d-4e6f-8a9b-1c2d3e4f5a65"`},
		// The worker refused OPERATOR_LINE_IDS=OperatorLineIds (sam's value
		// for a Ref to a parameter with no default): stdout is empty.
		{"init-failed", ErrInitFailed, `worker cannot start: configuration: OPERATOR_LINE_IDS: "OperatorLineIds" is not a LINE user`},
		{"handler-error", &FunctionError{}, "UnmarshalTypeError: json: cannot unmarshal string"},
		{"timeout", ErrInvokeFailed, "Function 'WorkerFunction' timed out after 3 seconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr := readCase(t, tc.name)
			inv, err := ParseInvocation(stdout, stderr)
			if inv.Log != string(stderr) {
				t.Errorf("Log is not sam's stderr")
			}
			var fe *FunctionError
			switch {
			case tc.wantErr == nil:
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				if !json.Valid(inv.Response) || !strings.Contains(string(inv.Response), tc.wantText) {
					t.Fatalf("response %s, want JSON with %s", inv.Response, tc.wantText)
				}
			case errors.As(tc.wantErr, &fe):
				if !errors.As(err, &fe) || fe.Type == "" {
					t.Fatalf("err = %v, want a *FunctionError", err)
				}
			case !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if tc.wantErr != nil && !strings.Contains(err.Error(), tc.wantText) {
				t.Errorf("err %q does not say %q", err, tc.wantText)
			}
		})
	}
}

func TestParseInvocationEdges(t *testing.T) {
	okLog := "START RequestId: x Version: $LATEST\nEND RequestId: x\n"
	for _, tc := range []struct {
		name           string
		stdout, stderr string
		want           error
	}{
		{"nothing on stdout", "", okLog, ErrNoResponse},
		{"whitespace only", " \n", okLog, ErrNoResponse},
		{"not JSON", "Traceback (most recent call last):", okLog, ErrNoResponse},
		{"invoke failed after a good INIT", `{"statusCode":200}`, okLog + "01 Dec 2026 21:39:51,972 [ERROR] (rapid) Invoke DONE failed: Sandbox.Failure\n", ErrInvokeFailed},
		{"INIT failure wins over a response", `{"statusCode":200}`, "[ERROR] (rapid) Init failed error=Runtime exited\n", ErrInitFailed},
		{"a timeout line with a response is the function's own log", `{"ok":true}`, okLog + "fetch timed out after 3 seconds, retried\n", nil},
		{"an object with more than Lambda's error keys is a response", `{"errorType":"x","errorMessage":"y","statusCode":500}`, okLog, nil},
		{"a non-string errorType is a response", `{"errorType":1,"errorMessage":"y"}`, okLog, nil},
		{"a JSON string is a response", `"hello"`, okLog, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseInvocation([]byte(tc.stdout), []byte(tc.stderr))
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
		})
	}
	t.Run("INIT failure without a function log line", func(t *testing.T) {
		_, err := ParseInvocation(nil, []byte("[ERROR] (rapid) Init failed error=Runtime exited with error: exit status 2 InvokeID=\n"))
		if !errors.Is(err, ErrInitFailed) || !strings.Contains(err.Error(), "exit status 2") {
			t.Fatalf("err = %v, want ErrInitFailed with the runtime's reason", err)
		}
	})
}

// FuzzParseInvocation feeds sam's output (outside input: another program's
// text) to ParseInvocation: it never panics, a nil error always comes with a
// JSON response, and an error is always one of the verdicts.
func FuzzParseInvocation(f *testing.F) {
	for _, name := range []string{"webhook-ok", "worker-poison", "init-failed", "handler-error", "timeout"} {
		stdout, stderr := readCase(f, name)
		f.Add(stdout, stderr)
	}
	f.Add([]byte(`{"errorType":"a","errorMessage":"b","stackTrace":[]}`), []byte(`{"level":"ERROR","message":"m"}`+"\n(rapid) Init failed"))
	f.Fuzz(func(t *testing.T, stdout, stderr []byte) {
		inv, err := ParseInvocation(stdout, stderr)
		var fe *FunctionError
		switch {
		case err == nil:
			if !json.Valid(inv.Response) {
				t.Fatalf("no error but the response is not JSON: %q", inv.Response)
			}
		case errors.Is(err, ErrInitFailed), errors.Is(err, ErrInvokeFailed), errors.Is(err, ErrNoResponse), errors.As(err, &fe):
		default:
			t.Fatalf("error outside the verdicts: %v", err)
		}
	})
}
