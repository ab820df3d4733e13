// Package awswire serves the AWS APIs linegate's functions call, over their
// real wire protocols, from in-process implementations: SQS (JSON 1.0),
// EventBridge (JSON 1.1), SNS (query) and the DynamoDB calls of the
// idempotency store (JSON 1.0). `linegate local` mounts it on its own address,
// so a function run elsewhere (`sam local invoke` with events/env.json, the
// SDK clients in tests, `linegate redrive --endpoint-url`) reaches the local
// cloud with AWS_ENDPOINT_URL alone.
//
// It decodes each request into the SDK's own input type and answers with the
// SDK's output type, so the ports it calls are exactly the SDK clients'
// methods; errors travel as the protocol's error documents, so the SDK hands
// its caller the same typed errors AWS would.
package awswire

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"reflect"
	"sort"
	"strconv"
	"strings"

	smithy "github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/aws/smithy-go/transport/http/protocol/awsjson"
)

// maxBody caps a request body: SQS and EventBridge take at most 1 MiB of
// payload, the JSON around it adds little.
const maxBody = 2 << 20

// Server answers AWS API requests. Build it with New.
type Server struct {
	sqs     SQS
	events  EventBridge
	sns     SNS
	ddb     *Tables
	observe func(service, op string, err error)
	// answered, when set, sees every operation's output before it is
	// encoded (the tests compare it with what the SDK decodes).
	answered func(service, op string, out any)
	json     map[string]jsonOp // by X-Amz-Target
}

// Option configures a Server.
type Option func(*Server)

// WithSQS serves SQS's JSON protocol (X-Amz-Target AmazonSQS.*) with q.
func WithSQS(q SQS) Option { return func(s *Server) { s.sqs = q } }

// WithEventBridge serves EventBridge's JSON 1.1 protocol (AWSEvents.*) with e.
func WithEventBridge(e EventBridge) Option { return func(s *Server) { s.events = e } }

// WithSNS serves SNS's query protocol (form posts with an Action) with n.
func WithSNS(n SNS) Option { return func(s *Server) { s.sns = n } }

// WithDynamoDB serves DynamoDB's JSON 1.0 protocol
// (DynamoDB_20120810.*) from t.
func WithDynamoDB(t *Tables) Option { return func(s *Server) { s.ddb = t } }

// WithObserver is called after every request with the service ("SQS",
// "EventBridge", "SNS", "DynamoDB"), the operation and its error, for logs.
func WithObserver(f func(service, op string, err error)) Option {
	return func(s *Server) { s.observe = f }
}

// New returns a server for the services given by options; a request for
// another service is answered as AWS answers an unknown operation.
func New(opts ...Option) *Server {
	s := &Server{json: map[string]jsonOp{}, observe: func(string, string, error) {}}
	for _, o := range opts {
		o(s)
	}
	if s.sqs != nil {
		s.addSQS()
	}
	if s.events != nil {
		s.addEventBridge()
	}
	if s.ddb != nil {
		s.addDynamoDB()
	}
	return s
}

// operations lists every operation the server serves, as "Service.Op"
// (SQS.GetQueueUrl, SNS.Publish, ...), sorted.
func (s *Server) operations() []string {
	var out []string
	for target, op := range s.json {
		out = append(out, op.service+"."+target[strings.LastIndex(target, ".")+1:])
	}
	if s.sns != nil {
		for action := range snsActions {
			out = append(out, "SNS."+action)
		}
	}
	sort.Strings(out)
	return out
}

// jsonOp is one operation of a JSON protocol: it decodes the body, calls
// the port and returns the output to encode.
type jsonOp struct {
	service   string // for the observer
	namespace string // of error shapes, e.g. "com.amazonaws.sqs"
	query     bool   // awsQueryCompatible: errors also carry X-Amzn-Query-Error
	version   string // "1.0" or "1.1": the response's content type
	call      func(ctx context.Context, body []byte) (any, error)
	// encode writes an output; nil is encoding/json (the DynamoDB
	// documents the server builds itself).
	encode func(ctx context.Context, out any) ([]byte, error)
}

// ServeHTTP dispatches on X-Amz-Target (JSON protocols) or the form's Action
// (the query protocol).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBody))
	if err != nil {
		http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
		return
	}
	if target := r.Header.Get("X-Amz-Target"); target != "" {
		s.serveJSON(w, r.Context(), target, body)
		return
	}
	if strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") && s.sns != nil {
		s.serveQuery(w, r.Context(), body)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	writeJSONError(w, http.StatusBadRequest, "com.amazon.coral.service#UnknownOperationException", "", "no X-Amz-Target and no query Action")
}

func (s *Server) serveJSON(w http.ResponseWriter, ctx context.Context, target string, body []byte) {
	op, ok := s.json[target]
	if !ok {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		writeJSONError(w, http.StatusBadRequest, "com.amazon.coral.service#UnknownOperationException", "", target+" is not served by linegate local")
		return
	}
	name := target[strings.LastIndex(target, ".")+1:]
	if op.service == "DynamoDB" {
		cw := &checksummed{ResponseWriter: w}
		defer cw.send()
		w = cw
	}
	w.Header().Set("Content-Type", "application/x-amz-json-"+op.version)
	out, err := op.call(ctx, body)
	s.observe(op.service, name, err)
	var de *ddbError
	if errors.As(err, &de) {
		writeDDBError(w, de)
		return
	}
	if err != nil {
		shape, code, msg, status := errorParts(err)
		query := ""
		if op.query {
			query = code + ";Sender"
			if status >= 500 {
				query = code + ";Receiver"
			}
		}
		writeJSONError(w, status, op.namespace+"#"+shape, query, msg)
		return
	}
	if s.answered != nil {
		s.answered(op.service, name, out)
	}
	encode := op.encode
	if encode == nil {
		encode = func(_ context.Context, out any) ([]byte, error) { return json.Marshal(out) }
	}
	b, err := encode(ctx, out)
	if err != nil {
		writeJSONError(w, http.StatusInternalServerError, op.namespace+"#InternalFailure", "", err.Error())
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

// responseSchema names the operation of sdkEncoder's serialisation: the
// protocol wants one, and its name only ends up in a header nobody reads.
var responseSchema = smithy.NewSchema(smithy.ShapeID{Namespace: "linegate.awswire", Name: "Response"}, smithy.ShapeTypeOperation, 0)

// sdkEncoder encodes an SDK output type with the SDK's own serializer for
// the service's JSON protocol (the protocol serialises whatever Serializable
// it is given; an output's Serialize writes the output shape), so member
// names (SQS's "queueUrls"), timestamps and blobs are the service model's:
// exactly what the SDK's deserializer reads. encoding/json would write the
// Go field names.
func sdkEncoder(p *awsjson.Protocol) func(ctx context.Context, out any) ([]byte, error) {
	return func(ctx context.Context, out any) ([]byte, error) {
		v, ok := out.(smithy.Serializable)
		if !ok {
			return nil, fmt.Errorf("awswire: %T is not an SDK output", out)
		}
		req := smithyhttp.NewStackRequest().(*smithyhttp.Request)
		if err := p.SerializeRequest(ctx, smithy.NewOperationSchema(responseSchema, responseSchema, nil), v, req); err != nil {
			return nil, fmt.Errorf("awswire: encode %T: %w", out, err)
		}
		return io.ReadAll(req.GetStream())
	}
}

// decodeInto is the JSON protocols' request decoding: the SDK serialises
// each input member under its name, which encoding/json maps onto the SDK's
// input struct. A body that does not decode is AWS's SerializationException.
func decodeInto(body []byte, in any) error {
	if len(body) == 0 {
		return nil
	}
	if err := json.Unmarshal(body, in); err != nil {
		return &smithy.GenericAPIError{Code: "SerializationException", Message: "the request body could not be read: " + err.Error(), Fault: smithy.FaultClient}
	}
	return nil
}

// sdkCall adapts an SDK-shaped method (what the ports declare) to a JSON
// operation.
func sdkCall[I, O, P any](f func(context.Context, *I, ...func(*P)) (*O, error)) func(context.Context, []byte) (any, error) {
	return func(ctx context.Context, body []byte) (any, error) {
		in := new(I)
		if err := decodeInto(body, in); err != nil {
			return nil, err
		}
		return f(ctx, in)
	}
}

// errorParts turns a port's error into the protocol's: the error shape's
// name, the (query-compatible) error code, the message and the HTTP status.
// A typed SDK error keeps its shape; a generic API error its code; a
// client-side validation error becomes a ValidationException.
func errorParts(err error) (shape, code, msg string, status int) {
	var api smithy.APIError
	if errors.As(err, &api) {
		code, msg = api.ErrorCode(), api.ErrorMessage()
		shape = code
		if _, generic := api.(*smithy.GenericAPIError); !generic {
			if t := reflect.TypeOf(api); t.Kind() == reflect.Pointer {
				shape = t.Elem().Name()
			}
		}
		status = http.StatusBadRequest
		if api.ErrorFault() == smithy.FaultServer {
			status = http.StatusInternalServerError
		}
		return shape, code, msg, status
	}
	var invalid smithy.InvalidParamsError
	if errors.As(err, &invalid) {
		return "ValidationException", "ValidationException", invalid.Error(), http.StatusBadRequest
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return "RequestCanceled", "RequestCanceled", err.Error(), http.StatusServiceUnavailable
	}
	return "InternalFailure", "InternalFailure", err.Error(), http.StatusInternalServerError
}

func writeJSONError(w http.ResponseWriter, status int, typ, queryError, msg string) {
	if queryError != "" {
		w.Header().Set("X-Amzn-Query-Error", queryError)
	}
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]string{"__type": typ, "message": msg})
	_, _ = w.Write(b)
}

// checksummed holds a DynamoDB response back to send it with X-Amz-Crc32,
// the CRC32 (IEEE) of its body, as DynamoDB sends on every response
// (https://pkg.go.dev/github.com/aws/aws-sdk-go-v2/service/dynamodb/internal/customizations:
// "DynamoDB responses can include a X-Amz-Crc32 header with the CRC32
// checksum value of the response body"). The SDK checks the body against
// the header even when it is missing (against 0), and logs a mismatch
// warning for every response without it: a line in the function's log that
// the real service never causes.
type checksummed struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

// WriteHeader keeps the status for send.
func (c *checksummed) WriteHeader(status int) {
	if c.status == 0 {
		c.status = status
	}
}

// Write keeps the body for send.
func (c *checksummed) Write(b []byte) (int, error) { return c.body.Write(b) }

// send writes the response with its checksum.
func (c *checksummed) send() {
	c.ResponseWriter.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(c.body.Bytes())), 10))
	if c.status == 0 {
		c.status = http.StatusOK
	}
	c.ResponseWriter.WriteHeader(c.status)
	_, _ = c.ResponseWriter.Write(c.body.Bytes())
}
