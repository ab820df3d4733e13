// Command worker is the worker function, running the bot of package app
// (package github.com/linegate/linegate/pkg/run/worker).
package main

import (
	"github.com/linegate/linegate/internal/app"
	"github.com/linegate/linegate/pkg/run/worker"
)

func main() { worker.Start(app.New()) }
