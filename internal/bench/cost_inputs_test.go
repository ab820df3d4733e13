package bench

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/linegate/linegate/internal/template"
)

// The table follows the template's memory sizes and the access log's class,
// and refuses what it cannot price honestly: a memory size whose billed
// duration was never measured, an access log whose group it cannot find.
func TestCostFollowsTheTemplate(t *testing.T) {
	raw, err := os.ReadFile("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	base, err := CostFromTemplate("../../template.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The access log's share at each class: 188 B per event.
	n := float64(accessLogBytes(accessLogFormatOf(t)))
	standard, infrequent := n/1e3*priceLogsGB, n/1e3*priceLogsIAGB
	const (
		class     = "      LogGroupClass: INFREQUENT_ACCESS\n"
		memory    = "  WorkerMemorySize:\n    Type: Number\n    Default: 128\n"
		accessArn = "DestinationArn: !GetAtt ApiAccessLogGroup.Arn"
	)
	tests := []struct {
		name    string
		edit    func(string) string
		wantErr string
		logsUSD float64 // the CloudWatch Logs row less the base's; 0: unchanged
		worker  string  // in the worker's row
	}{
		{name: "as deployed", edit: func(s string) string { return s }, worker: workerRow(128)},
		{name: "access log Standard", edit: func(s string) string { return strings.Replace(s, class, "", 1) }, logsUSD: standard - infrequent},
		{name: "class from a parameter", edit: func(s string) string {
			s = strings.Replace(s, class, "      LogGroupClass: !Ref AccessLogClass\n", 1)
			return strings.Replace(s, "Parameters:\n", "Parameters:\n  AccessLogClass:\n    Type: String\n    Default: STANDARD\n", 1)
		}, logsUSD: standard - infrequent},
		{name: "worker at 256 MB", edit: func(s string) string {
			return strings.Replace(s, memory, strings.Replace(memory, "128", "256", 1), 1)
		}, worker: workerRow(256)},
		{name: "worker at a size never measured", edit: func(s string) string {
			return strings.Replace(s, memory, strings.Replace(memory, "128", "1024", 1), 1)
		}, wantErr: "WorkerFunction at 1024 MB: no billed duration measured"},
		{name: "access log to an ARN", edit: func(s string) string {
			return strings.Replace(s, accessArn, `DestinationArn: "arn:aws:logs:us-east-1:123456789012:log-group:x"`, 1)
		}, wantErr: "is not !GetAtt <LogGroup>.Arn"},
		{name: "access log to no log group", edit: func(s string) string {
			return strings.Replace(s, accessArn, "DestinationArn: !GetAtt WebhookFunction.Arn", 1)
		}, wantErr: "goes to WebhookFunction, which is no AWS::Logs::LogGroup"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			edited := tt.edit(string(raw))
			if tt.name != "as deployed" && edited == string(raw) {
				t.Fatal("the edit changed nothing: the template moved under this test")
			}
			path := filepath.Join(t.TempDir(), "template.yaml")
			if err := os.WriteFile(path, []byte(edited), 0o644); err != nil {
				t.Fatal(err)
			}
			c, err := CostFromTemplate(path)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := row(t, c, "CloudWatch Logs").USD - row(t, base, "CloudWatch Logs").USD; d < tt.logsUSD-1e-9 || d > tt.logsUSD+1e-9 {
				t.Errorf("CloudWatch Logs changed by $%.4f, want $%.4f", d, tt.logsUSD)
			}
			if tt.worker != "" && !strings.Contains(row(t, c, "Worker Lambda").Item, tt.worker) {
				t.Errorf("worker row %q, want %q", row(t, c, "Worker Lambda").Item, tt.worker)
			}
		})
	}
}

// row is the per-million row whose item starts with prefix.
func row(t *testing.T, c Cost, prefix string) CostRow {
	t.Helper()
	for _, r := range c.Rows {
		if strings.HasPrefix(r.Item, prefix) {
			return r
		}
	}
	t.Fatalf("no %q row in %+v", prefix, c.Rows)
	return CostRow{}
}

// accessLogFormatOf is the template's access log format.
func accessLogFormatOf(t *testing.T) string {
	t.Helper()
	top, err := template.Load("../../template.yaml", map[string]string{"OperatorLineIds": "U" + strings.Repeat("0", 32)})
	if err != nil || len(top.APIs) != 1 || top.APIs[0].AccessLogFormat == "" {
		t.Fatalf("the template's one API and its access log: %v", err)
	}
	return top.APIs[0].AccessLogFormat
}

// workerRow is how the cost table names the worker at a memory size: its
// measured billed duration there.
func workerRow(mb int) string {
	return fmt.Sprintf("%d MB, ~%.0f ms", mb, billedSeconds["WorkerFunction"][mb]*1000)
}
