package awswire

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"net/http"
	"net/url"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	smithy "github.com/aws/smithy-go"
	"github.com/google/uuid"
)

// SNS is the SNS calls the server serves: the worker's crash reports
// (Publish), and what provisioning and the conformance suite call.
type SNS interface {
	CreateTopic(ctx context.Context, in *sns.CreateTopicInput, optFns ...func(*sns.Options)) (*sns.CreateTopicOutput, error)
	Subscribe(ctx context.Context, in *sns.SubscribeInput, optFns ...func(*sns.Options)) (*sns.SubscribeOutput, error)
	Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
}

// snsNamespace is the XML namespace of SNS's responses.
const snsNamespace = "http://sns.amazonaws.com/doc/2010-03-31/"

// serveQuery answers SNS's query protocol: a form with Action and the
// input's members flattened (Attributes.entry.1.key, ...), answered with
// <ActionResponse><ActionResult>…</ActionResult></ActionResponse>.
func (s *Server) serveQuery(w http.ResponseWriter, ctx context.Context, body []byte) {
	form, err := url.ParseQuery(string(body))
	action := form.Get("Action")
	w.Header().Set("Content-Type", "text/xml")
	if err != nil || action == "" {
		writeQueryError(w, http.StatusBadRequest, "MalformedQueryString", "the request is not a form with an Action")
		return
	}
	var result [][2]string // the result's members, in order
	var out any
	if call, ok := snsActions[action]; ok {
		result, out, err = call(ctx, s.sns, form)
	} else {
		err = &smithy.GenericAPIError{Code: "InvalidAction", Message: "SNS " + action + " is not served by linegate local", Fault: smithy.FaultClient}
	}
	s.observe("SNS", action, err)
	if err != nil {
		_, code, msg, status := errorParts(err)
		var nf *snstypes.NotFoundException
		if errors.As(err, &nf) {
			status = http.StatusNotFound
		}
		writeQueryError(w, status, code, msg)
		return
	}
	if s.answered != nil {
		s.answered("SNS", action, out)
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(queryResponse(action, result, uuid.NewString()))
}

// snsAction serves one SNS action: it reads the input from the form, calls
// the port and returns the result's members in order, with the port's
// output.
type snsAction func(ctx context.Context, n SNS, form url.Values) ([][2]string, any, error)

// snsActions are the SNS actions the server serves.
var snsActions = map[string]snsAction{
	"Publish": func(ctx context.Context, n SNS, form url.Values) ([][2]string, any, error) {
		out, err := n.Publish(ctx, publishInput(form))
		if err != nil {
			return nil, nil, err
		}
		result := [][2]string{{"MessageId", aws.ToString(out.MessageId)}}
		if out.SequenceNumber != nil {
			result = append(result, [2]string{"SequenceNumber", *out.SequenceNumber})
		}
		return result, out, nil
	},
	"CreateTopic": func(ctx context.Context, n SNS, form url.Values) ([][2]string, any, error) {
		out, err := n.CreateTopic(ctx, &sns.CreateTopicInput{Name: optional(form, "Name"), Attributes: queryMap(form, "Attributes", "key", "value")})
		if err != nil {
			return nil, nil, err
		}
		return [][2]string{{"TopicArn", aws.ToString(out.TopicArn)}}, out, nil
	},
	"Subscribe": func(ctx context.Context, n SNS, form url.Values) ([][2]string, any, error) {
		in := &sns.SubscribeInput{TopicArn: optional(form, "TopicArn"), Protocol: optional(form, "Protocol"), Endpoint: optional(form, "Endpoint"),
			Attributes: queryMap(form, "Attributes", "key", "value"), ReturnSubscriptionArn: form.Get("ReturnSubscriptionArn") == "true"}
		out, err := n.Subscribe(ctx, in)
		if err != nil {
			return nil, nil, err
		}
		return [][2]string{{"SubscriptionArn", aws.ToString(out.SubscriptionArn)}}, out, nil
	},
}

// queryResponse is <ActionResponse><ActionResult>members</ActionResult>
// <ResponseMetadata><RequestId>…</RequestId></ResponseMetadata></ActionResponse>.
func queryResponse(action string, members [][2]string, requestID string) []byte {
	var b bytes.Buffer
	b.WriteString(`<` + action + `Response xmlns="` + snsNamespace + `"><` + action + `Result>`)
	for _, m := range members {
		b.WriteString("<" + m[0] + ">")
		_ = xml.EscapeText(&b, []byte(m[1]))
		b.WriteString("</" + m[0] + ">")
	}
	b.WriteString(`</` + action + `Result><ResponseMetadata><RequestId>` + requestID + `</RequestId></ResponseMetadata></` + action + `Response>`)
	return b.Bytes()
}

func writeQueryError(w http.ResponseWriter, status int, code, msg string) {
	type errDoc struct {
		XMLName xml.Name `xml:"ErrorResponse"`
		Xmlns   string   `xml:"xmlns,attr"`
		Error   struct {
			Type    string `xml:"Type"`
			Code    string `xml:"Code"`
			Message string `xml:"Message"`
		} `xml:"Error"`
		RequestID string `xml:"RequestId"`
	}
	d := errDoc{Xmlns: snsNamespace, RequestID: uuid.NewString()}
	d.Error.Type, d.Error.Code, d.Error.Message = "Sender", code, msg
	if status >= 500 {
		d.Error.Type = "Receiver"
	}
	b, _ := xml.Marshal(d)
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func optional(form url.Values, key string) *string {
	if !form.Has(key) {
		return nil
	}
	return aws.String(form.Get(key))
}

// queryMap reads a flattened map: prefix.entry.N.<k> and prefix.entry.N.<v>
// for N = 1, 2, … until an entry is missing.
func queryMap(form url.Values, prefix, k, v string) map[string]string {
	var out map[string]string
	for n := 1; ; n++ {
		base := prefix + ".entry." + strconv.Itoa(n) + "."
		if !form.Has(base + k) {
			return out
		}
		if out == nil {
			out = map[string]string{}
		}
		out[form.Get(base+k)] = form.Get(base + v)
	}
}

// publishInput reads Publish's members, message attributes included
// (MessageAttributes.entry.N.Name and .Value.DataType/StringValue/BinaryValue).
func publishInput(form url.Values) *sns.PublishInput {
	in := &sns.PublishInput{
		TopicArn: optional(form, "TopicArn"), TargetArn: optional(form, "TargetArn"), PhoneNumber: optional(form, "PhoneNumber"),
		Message: optional(form, "Message"), Subject: optional(form, "Subject"), MessageStructure: optional(form, "MessageStructure"),
		MessageGroupId: optional(form, "MessageGroupId"), MessageDeduplicationId: optional(form, "MessageDeduplicationId"),
	}
	for n := 1; ; n++ {
		base := "MessageAttributes.entry." + strconv.Itoa(n) + "."
		if !form.Has(base + "Name") {
			break
		}
		if in.MessageAttributes == nil {
			in.MessageAttributes = map[string]snstypes.MessageAttributeValue{}
		}
		v := snstypes.MessageAttributeValue{DataType: optional(form, base+"Value.DataType"), StringValue: optional(form, base+"Value.StringValue")}
		if b := form.Get(base + "Value.BinaryValue"); b != "" {
			v.BinaryValue, _ = base64.StdEncoding.DecodeString(b)
		}
		in.MessageAttributes[form.Get(base+"Name")] = v
	}
	return in
}
