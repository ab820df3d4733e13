// Package testsns is the one recording SNS topic of linegate's tests: it
// satisfies every narrow Publish interface a package declares (the worker's
// crash reports, the held-results notice) and keeps what was published for
// the test's assertions.
package testsns

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
)

// Topic accepts every Publish and keeps its input. The zero value is ready;
// it is safe for concurrent use.
type Topic struct {
	mu   sync.Mutex
	msgs []*sns.PublishInput
}

// Publish records in and answers with a message id, the publish's number
// ("1" for the first).
func (t *Topic) Publish(_ context.Context, in *sns.PublishInput, _ ...func(*sns.Options)) (*sns.PublishOutput, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.msgs = append(t.msgs, in)
	return &sns.PublishOutput{MessageId: aws.String(fmt.Sprint(len(t.msgs)))}, nil
}

// Published is every input published so far, in order.
func (t *Topic) Published() []*sns.PublishInput {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.msgs)
}
