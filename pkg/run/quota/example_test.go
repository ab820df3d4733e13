package quota_test

import (
	"context"
	"fmt"
	"os"

	"github.com/linegate/linegate/pkg/run/quota"
)

// A function whose environment lacks what it needs does not start: the
// error names every problem (Start logs it as one JSON line and exits 1,
// failing the function's INIT).
func ExampleHandler() {
	os.Setenv("LINE_CHANNEL_ACCESS_TOKEN", "local-channel-access-token")
	os.Setenv("OPERATOR_LINE_IDS", "")
	_, err := quota.Handler(context.Background())
	fmt.Println(err)
	// Output: configuration: OPERATOR_LINE_IDS is not set: the LINE user or group IDs that receive quota cards, comma-separated
}
