// Command webhook is the webhook function (package
// github.com/linegate/linegate/pkg/run/webhook).
package main

import "github.com/linegate/linegate/pkg/run/webhook"

func main() { webhook.Start() }
