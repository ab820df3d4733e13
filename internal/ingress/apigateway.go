package ingress

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/linegate/linegate/internal/signature"
)

// APIGateway adapts Handle to an API Gateway REST proxy event, the shape the
// webhook Lambda receives. A base64-encoded body (isBase64Encoded) is decoded
// before the signature is checked, since LINE signed the raw bytes. It never
// returns an error: every outcome is an HTTP response, so API Gateway does not
// turn a rejected request into a 502. The route's {channel} path parameter
// (POST /webhook/{channel}) names the channel; without one (POST /webhook)
// the request is the default channel's.
func (h *Handler) APIGateway(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	body := []byte(req.Body)
	if req.IsBase64Encoded {
		// Refuse before decoding anything that cannot fit once decoded.
		if int64(base64.StdEncoding.DecodedLen(len(req.Body))) > h.maxBody+3 {
			return proxyResponse(Response{413, bodyTooLarge}, nil), nil
		}
		dec, err := base64.StdEncoding.DecodeString(req.Body)
		if err != nil {
			return proxyResponse(Response{400, bodyInvalid}, nil), nil
		}
		body = dec
	}
	sig, ok := header(req, signature.Header)
	if !ok {
		sig = ""
	}
	resp, err := h.HandleChannel(ctx, req.PathParameters[PathParameter], strings.ToUpper(req.HTTPMethod), sig, body)
	return proxyResponse(resp, err), nil
}

// PathParameter is the name of the webhook route's path parameter that
// names a channel: POST /webhook/{channel}.
const PathParameter = "channel"

// header finds a header case-insensitively. API Gateway puts every value of
// a header in MultiValueHeaders and only the last one in Headers, so the
// multi-value map is read when it has the header, Headers otherwise. A header
// sent more than once (even twice with the same value) counts as not found:
// LINE sends exactly one signature.
func header(req events.APIGatewayProxyRequest, name string) (string, bool) {
	var found []string
	for k, vs := range req.MultiValueHeaders {
		if strings.EqualFold(k, name) {
			found = append(found, vs...)
		}
	}
	if len(found) == 0 {
		for k, v := range req.Headers {
			if strings.EqualFold(k, name) {
				found = append(found, v)
			}
		}
	}
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

func proxyResponse(r Response, err error) events.APIGatewayProxyResponse {
	out := events.APIGatewayProxyResponse{
		StatusCode: r.Status,
		Headers:    map[string]string{"Content-Type": "application/json"},
		Body:       string(r.Body),
	}
	if errors.Is(err, ErrMethod) {
		out.Headers["Allow"] = "POST"
	}
	return out
}
