package testsns_test

import (
	"context"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"

	"github.com/linegate/linegate/internal/testsns"
)

func TestTopicKeepsEveryPublish(t *testing.T) {
	var tp testsns.Topic
	var wg sync.WaitGroup
	ids := make(chan string, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := tp.Publish(context.Background(), &sns.PublishInput{Message: aws.String("m")})
			if err != nil {
				t.Error(err)
				return
			}
			ids <- aws.ToString(out.MessageId)
		}()
	}
	wg.Wait()
	close(ids)
	seen := map[string]bool{}
	for id := range ids {
		seen[id] = true
	}
	if got := tp.Published(); len(got) != 8 || len(seen) != 8 || !seen["1"] || !seen["8"] {
		t.Fatalf("%d published, message ids %v; want 8 and ids 1 to 8", len(got), seen)
	}
}
