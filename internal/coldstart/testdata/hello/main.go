// Command hello is the cold-start baseline: the smallest aws-lambda-go
// function, built and started by the same harness as linegate's functions
// (internal/coldstart), so their INIT is reported next to it.
package main

import (
	"context"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(func(context.Context) (string, error) { return "hello", nil })
}
