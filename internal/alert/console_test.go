package alert

import "testing"

// TestConsoleBasePartitions pins the CloudWatch console of each partition:
// a China or GovCloud alarm must not link to the commercial console, where
// its account does not exist.
func TestConsoleBasePartitions(t *testing.T) {
	for _, tc := range []struct{ region, want string }{
		{"ap-northeast-1", "https://ap-northeast-1.console.aws.amazon.com/cloudwatch/home?region=ap-northeast-1"},
		{"us-east-1", "https://us-east-1.console.aws.amazon.com/cloudwatch/home?region=us-east-1"},
		{"cn-north-1", "https://console.amazonaws.cn/cloudwatch/home?region=cn-north-1"},
		{"cn-northwest-1", "https://console.amazonaws.cn/cloudwatch/home?region=cn-northwest-1"},
		{"us-gov-west-1", "https://console.amazonaws-us-gov.com/cloudwatch/home?region=us-gov-west-1"},
		{"us-gov-east-1", "https://console.amazonaws-us-gov.com/cloudwatch/home?region=us-gov-east-1"},
	} {
		if got := consoleBase(tc.region); got != tc.want {
			t.Errorf("consoleBase(%q) = %q, want %q", tc.region, got, tc.want)
		}
	}
}
