package lineapi

import (
	"context"
	"net/http"

	"github.com/line/line-bot-sdk-go/v8/linebot/messaging_api"
)

// Quota is the channel's message quota for the current month
// (GET /v2/bot/message/quota and /v2/bot/message/quota/consumption).
type Quota struct {
	// Limited is false when no target limit is set (type "none"): pushes are
	// then only bounded by the plan's billing.
	Limited bool
	// Limit is the month's target limit (free plus additional messages) when
	// Limited.
	Limit int64
	// Used is the number of messages sent this month.
	Used int64
}

// Remaining is how many messages may still be pushed this month (-1 when
// the quota is not limited).
func (q Quota) Remaining() int64 {
	if !q.Limited {
		return -1
	}
	return max(q.Limit-q.Used, 0)
}

// Quota reads the month's target limit and use. Both reads are retried like
// any idempotent call.
func (c *Client) Quota(ctx context.Context) (Quota, error) {
	var q Quota
	var limit *messaging_api.MessageQuotaResponse
	_, err := c.do(ctx, "quota", true, func(api *messaging_api.MessagingApiAPI) (*http.Response, error) {
		res, body, err := api.GetMessageQuotaWithHttpInfo()
		limit = body
		return res, err
	})
	if err != nil {
		return q, c.finish(ctx, "quota", err)
	}
	var used *messaging_api.QuotaConsumptionResponse
	_, err = c.do(ctx, "quota", true, func(api *messaging_api.MessagingApiAPI) (*http.Response, error) {
		res, body, err := api.GetMessageQuotaConsumptionWithHttpInfo()
		used = body
		return res, err
	})
	if err != nil {
		return q, c.finish(ctx, "quota", err)
	}
	if limit != nil {
		q.Limited = limit.Type == messaging_api.QuotaType_LIMITED
		q.Limit = limit.Value
	}
	if used != nil {
		q.Used = used.TotalUsage
	}
	return q, nil
}

// WebhookEndpoint is the channel's webhook setting.
type WebhookEndpoint struct {
	Endpoint string // the webhook URL ("" when unset)
	Active   bool   // "Use webhook" is on
}

// WebhookEndpoint reads the channel's webhook URL and whether it is used.
func (c *Client) WebhookEndpoint(ctx context.Context) (WebhookEndpoint, error) {
	var out WebhookEndpoint
	_, err := c.do(ctx, "webhook endpoint", true, func(api *messaging_api.MessagingApiAPI) (*http.Response, error) {
		res, body, err := api.GetWebhookEndpointWithHttpInfo()
		if body != nil {
			out = WebhookEndpoint{Endpoint: body.Endpoint, Active: body.Active}
		}
		return res, err
	})
	return out, c.finish(ctx, "webhook endpoint", err)
}

// WebhookTest is what LINE's test delivery to the webhook saw.
type WebhookTest struct {
	Success    bool
	StatusCode int32
	Reason     string
	Detail     string
}

// TestWebhook makes LINE send a test webhook to endpoint ("" for the
// configured URL) and returns what the webhook answered.
func (c *Client) TestWebhook(ctx context.Context, endpoint string) (WebhookTest, error) {
	var out WebhookTest
	req := &messaging_api.TestWebhookEndpointRequest{Endpoint: endpoint}
	_, err := c.do(ctx, "webhook test", true, func(api *messaging_api.MessagingApiAPI) (*http.Response, error) {
		res, body, err := api.TestWebhookEndpointWithHttpInfo(req)
		if body != nil {
			out = WebhookTest{Success: body.Success, StatusCode: body.StatusCode, Reason: body.Reason, Detail: body.Detail}
		}
		return res, err
	})
	return out, c.finish(ctx, "webhook test", err)
}

// BotInfo reads the bot's user ID, basic ID and display name.
func (c *Client) BotInfo(ctx context.Context) (messaging_api.BotInfoResponse, error) {
	var out messaging_api.BotInfoResponse
	_, err := c.do(ctx, "bot info", true, func(api *messaging_api.MessagingApiAPI) (*http.Response, error) {
		res, body, err := api.GetBotInfoWithHttpInfo()
		if body != nil {
			out = *body
		}
		return res, err
	})
	return out, c.finish(ctx, "bot info", err)
}
