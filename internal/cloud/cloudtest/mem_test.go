package cloudtest_test

import (
	"testing"

	"github.com/linegate/linegate/internal/cloud/cloudtest"
	"github.com/linegate/linegate/internal/localstate"
)

func TestConformanceMem(t *testing.T) {
	cloudtest.Run(t, cloudtest.Harness{
		Name: "mem",
		New: func(t *testing.T) cloudtest.Backend {
			_, b := cloudtest.Mem(t)
			return b
		},
	})
}

// The in-memory cloud persisted to a state directory (linegate local
// --state) passes the same suite: the journal changes nothing callers see.
func TestConformanceMemPersisted(t *testing.T) {
	cloudtest.Run(t, cloudtest.Harness{
		Name: "mem+state",
		New: func(t *testing.T) cloudtest.Backend {
			st, err := localstate.Open(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() }) // after the cloud's Close
			c, b := cloudtest.Mem(t)
			if err := c.Persist(st); err != nil {
				t.Fatal(err)
			}
			return b
		},
	})
}
