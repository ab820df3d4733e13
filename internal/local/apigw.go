package local

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/ingress"
	"github.com/linegate/linegate/internal/signature"
	"github.com/linegate/linegate/internal/template"
)

// maxAPIGatewayBody is API Gateway's own payload limit (10 MB); the webhook
// core applies the configured, smaller, limit itself.
const maxAPIGatewayBody = 10 << 20

// apiGateway turns HTTP requests into API Gateway REST proxy events, exactly
// what the webhook Lambda receives, and the proxy response back into HTTP.
type apiGateway struct {
	fn      template.Function
	handler func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error)
	metrics interface{ Flush() error }
	runtime *Runtime
	secrets map[string][][]byte // by channel ("" the default's)
	maxBody int64               // the webhook's MAX_BODY_BYTES
}

func (a *apiGateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var acc acceptance
	defer func() {
		// Whatever happens below, worker lines held for this request's events
		// are printed (after the webhook line when there is one).
		if !acc.printed {
			held, n := acc.outcome()
			a.runtime.out.webhook(0, held, n, "aborted", time.Since(start))
		}
	}()
	if m := a.runtime.model; m != nil {
		status, done := m.admitWebhook()
		defer done()
		if status != 0 {
			acc.printed = true
			a.runtime.counters.api(status)
			a.runtime.out.webhook(status, nil, 0, http.StatusText(status), time.Since(start))
			http.Error(w, fmt.Sprintf(`{"message":%q}`, http.StatusText(status)), status)
			return
		}
	}
	body, status, reason := a.readBody(r)
	if status != 0 {
		acc.printed = true
		a.runtime.out.webhook(status, nil, 0, reason, time.Since(start))
		http.Error(w, fmt.Sprintf(`{"message":%q}`, reason), status)
		return
	}
	// The route's {channel} (POST /webhook/{channel}) as API Gateway passes
	// it: a path parameter, and the route's own path as the resource.
	ch, resource := r.PathValue(ingress.PathParameter), r.URL.Path
	var params map[string]string
	if r.Pattern != "" && strings.Contains(r.Pattern, "{"+ingress.PathParameter+"}") {
		params = map[string]string{ingress.PathParameter: ch}
		resource = strings.TrimPrefix(r.Pattern, r.Method+" ")
	}
	req := events.APIGatewayProxyRequest{
		Resource: resource, Path: r.URL.Path, HTTPMethod: r.Method, PathParameters: params,
		Headers: map[string]string{}, MultiValueHeaders: map[string][]string{},
		Body: string(body),
		RequestContext: events.APIGatewayProxyRequestContext{
			Stage: "prod", HTTPMethod: r.Method, ResourcePath: resource, Path: "/prod" + r.URL.Path,
			RequestTimeEpoch: start.UnixMilli(), Identity: events.APIGatewayRequestIdentity{SourceIP: r.RemoteAddr, UserAgent: r.UserAgent()},
		},
	}
	for k, vs := range r.Header {
		req.Headers[k] = vs[len(vs)-1]
		req.MultiValueHeaders[k] = vs
	}
	// LINE mints a reply token for every event it delivers; the local
	// Messaging API learns them from the (validly signed) webhook.
	if sigs := r.Header.Values(signature.Header); int64(len(body)) <= a.maxBody && len(sigs) == 1 && len(a.secrets[ch]) > 0 && signature.Verify(body, sigs[0], a.secrets[ch]...) {
		// The events' worker lines wait for this request's webhook line from
		// now: the chat queue can hand an event to a worker before the bus
		// call (which holds them too) has even started.
		acc.hold(a.runtime.out, a.issueReplyTokens(ch, body, start))
		a.runtime.console.store.Webhook(ch, body, start) // the console's chats and event activity
	}

	ctx, seg := a.runtime.startInvocation(withAcceptance(r.Context(), &acc), a.fn.Name)
	ctx, cancel := context.WithTimeout(ctx, a.fn.Timeout)
	resp, err := a.handler(ctx, req)
	cancel()
	if err != nil {
		resp = events.APIGatewayProxyResponse{StatusCode: 502, Body: `{"message":"Internal server error"}`}
	}
	seg.SetHTTPStatus(resp.StatusCode)
	seg.End(err)
	_ = a.metrics.Flush()
	a.runtime.counters.invoked(a.fn.Name, err)
	a.runtime.counters.api(resp.StatusCode)
	// The console line goes out before the response: a client that reads
	// the response and then the console sees them in that order.
	acc.printed = true
	held, n := acc.outcome()
	a.runtime.out.webhook(resp.StatusCode, held, n, errorReason(resp.Body), time.Since(start))
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.WriteString(w, resp.Body)
}

// readBody reads the request body through the webhook's own limit, before
// anything is buffered: at most maxBody+1 bytes are ever held. A body over
// the limit reaches the core cut at maxBody+1 bytes, and the core answers
// its 413 exactly as for the whole body. A declared length over API
// Gateway's own 10 MB payload limit is refused without reading, as API
// Gateway refuses it; a body that stops arriving (the server's read
// timeout) is answered 408. status is 0 when body is the request's.
func (a *apiGateway) readBody(r *http.Request) (body []byte, status int, reason string) {
	if r.ContentLength > maxAPIGatewayBody {
		return nil, http.StatusRequestEntityTooLarge, "Request Too Long"
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, a.maxBody+1))
	if err != nil {
		return nil, http.StatusRequestTimeout, "Request Timeout"
	}
	return body, 0, ""
}

// errorReason is the short error a rejected webhook answered with (the
// core's {"error": "..."} or API Gateway's {"message": "..."}).
func errorReason(body string) string {
	var e struct{ Error, Message string }
	_ = json.Unmarshal([]byte(body), &e)
	switch {
	case e.Error != "":
		return e.Error
	case e.Message != "":
		return e.Message
	}
	return "no reason given"
}

// issueReplyTokens registers the reply tokens and the messages'
// markAsReadTokens of a validly signed body of channel ch with the local
// LINE API (only ch's token may use them), and returns the body's
// webhookEventIds.
func (a *apiGateway) issueReplyTokens(ch string, body []byte, at time.Time) []string {
	var cb struct {
		Events []struct {
			WebhookEventID string `json:"webhookEventId"`
			ReplyToken     string `json:"replyToken"`
			Message        struct {
				ID              string `json:"id"`
				MarkAsReadToken string `json:"markAsReadToken"`
			} `json:"message"`
			Source struct {
				UserID  string `json:"userId"`
				GroupID string `json:"groupId"`
				RoomID  string `json:"roomId"`
			} `json:"source"`
		} `json:"events"`
	}
	if json.Unmarshal(body, &cb) != nil {
		return nil
	}
	var ids []string
	line := a.runtime.line
	for _, e := range cb.Events {
		if e.WebhookEventID != "" {
			ids = append(ids, e.WebhookEventID)
		}
		if line == nil {
			continue
		}
		to := e.Source.UserID
		if e.Source.GroupID != "" {
			to = e.Source.GroupID
		} else if e.Source.RoomID != "" {
			to = e.Source.RoomID
		}
		line.IssueChannelMarkAsReadToken(ch, e.Message.MarkAsReadToken, to, e.Message.ID)
		if e.ReplyToken != "" {
			line.IssueChannelReplyToken(ch, e.ReplyToken, to, at)
		}
	}
	return ids
}
