package telemetry

import "github.com/linegate/linegate/internal/testio"

// syncBuffer is a buffer safe for concurrent writers.
type syncBuffer = testio.Buffer
