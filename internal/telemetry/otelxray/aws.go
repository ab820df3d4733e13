package otelxray

import (
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/linegate/linegate/internal/telemetry"
)

// InstrumentAWS makes every call of clients built from cfg a client span of
// the trace in the call's context, named for the service, with the
// operation and region (the AWS SDK semantic conventions: rpc.system
// "aws-api", rpc.service, rpc.method), the HTTP status and AWS's request id,
// and sends X-Amzn-Trace-Id naming that span to the service, as the X-Ray
// SDK's awsv2 instrumentation does. Calls without a trace run untraced. It
// is written with the seam's verbs, so the span goes to the backend of the
// call's context.
func (b *Backend) InstrumentAWS(cfg *aws.Config) {
	if cfg == nil {
		return
	}
	cfg.APIOptions = append(cfg.APIOptions, addAWSMiddleware)
}

type awsSpanKey struct{}

func addAWSMiddleware(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("linegateTraceStart", startAWSSpan), middleware.After); err != nil {
		return err
	}
	return stack.Deserialize.Add(middleware.DeserializeMiddlewareFunc("linegateTraceResponse", traceAWSResponse), middleware.Before)
}

// startAWSSpan starts the call's span after the SDK has put the service and
// operation in the context, and ends it with the call's outcome.
func startAWSSpan(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	c, s := telemetry.StartAWSCall(ctx, awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), awsmiddleware.GetRegion(ctx))
	if s.ID() == "" {
		return next.HandleInitialize(ctx, in)
	}
	out, md, err := next.HandleInitialize(context.WithValue(c, awsSpanKey{}, s), in)
	s.End(err)
	return out, md, err
}

// traceAWSResponse sends the trace header with the request (after signing,
// like the X-Ray SDK: the header is not signed) and records the response's
// status and request id on the call's span.
func traceAWSResponse(ctx context.Context, in middleware.DeserializeInput, next middleware.DeserializeHandler) (middleware.DeserializeOutput, middleware.Metadata, error) {
	s, ok := ctx.Value(awsSpanKey{}).(*telemetry.Span)
	if !ok {
		return next.HandleDeserialize(ctx, in)
	}
	if req, ok := in.Request.(*smithyhttp.Request); ok {
		if h := telemetry.TraceHeader(ctx); h != "" {
			req.Header.Set(HeaderName, h)
		}
	}
	out, md, err := next.HandleDeserialize(ctx, in)
	if resp, ok := out.RawResponse.(*smithyhttp.Response); ok {
		s.SetHTTPStatus(resp.StatusCode)
	}
	if id, ok := awsmiddleware.GetRequestIDMetadata(md); ok {
		s.Metadata("aws.request_id", id)
	}
	return out, md, err
}
