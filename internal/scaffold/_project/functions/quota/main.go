// Command quota is the quota function (package
// github.com/linegate/linegate/pkg/run/quota).
package main

import "github.com/linegate/linegate/pkg/run/quota"

func main() { quota.Start() }
