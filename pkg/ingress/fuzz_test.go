package ingress

import (
	"context"
	"testing"

	"github.com/linegate/linegate/pkg/signature"
)

// FuzzHandle feeds arbitrary (signature, body) pairs, half of them validly
// signed, through the webhook core: it never panics, never answers outside the
// documented statuses, and never publishes unless the signature is valid.
func FuzzHandle(f *testing.F) {
	f.Add([]byte(`{"destination":"U1","events":[{"type":"message","webhookEventId":"01A"}]}`), "", true)
	f.Add([]byte(`{"events":[]}`), "", true)
	f.Add([]byte(`{"events":[{"type":"follow"},{"type":"unfollow"}]}`), "bad", false)
	f.Add([]byte(`{"events":[1,2]}`), "", true)
	f.Add([]byte(`[[[[[[[[[[`), "", true)
	f.Add([]byte("{\"events\":[{\"type\":\"\xff\"}]}"), "", true)
	f.Fuzz(func(t *testing.T, body []byte, sig string, signIt bool) {
		if signIt {
			sig = signature.Sign([]byte(secret), body)
		}
		pub := &fakePublisher{}
		h := newHandler(t, pub, WithMaxBodyBytes(64<<10))
		resp, _ := h.Handle(context.Background(), "POST", sig, body)
		switch resp.Status {
		case 200, 400, 401, 413:
		default:
			t.Fatalf("status %d", resp.Status)
		}
		valid := signature.Verify(body, sig, []byte(secret), []byte(prevSecret))
		if len(pub.entries) > 0 && !valid {
			t.Fatal("published with an invalid signature")
		}
		if resp.Status == 401 && valid {
			t.Fatal("valid signature answered 401")
		}
		if resp.Status != 200 && len(pub.entries) > 0 {
			t.Fatalf("status %d but published", resp.Status)
		}
	})
}
