// Command notifier is the notifier function (package
// github.com/linegate/linegate/pkg/run/notifier).
package main

import "github.com/linegate/linegate/pkg/run/notifier"

func main() { notifier.Start() }
