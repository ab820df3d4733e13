package telemetry

// SQSTraceAttribute is the SQS message system attribute that carries a
// message's trace header: SQS sets it from the sender's trace (or from
// SendMessage's MessageSystemAttributes), EventBridge from a PutEvents
// entry's TraceHeader, and Lambda hands it to the consumer in each record's
// Attributes. It is the only system attribute SQS accepts on a send
// (https://docs.aws.amazon.com/AWSSimpleQueueService/latest/APIReference/API_SendMessage.html,
// MessageSystemAttributes).
const SQSTraceAttribute = "AWSTraceHeader"

// SQSTraceHeader returns the trace header an SQS message carries, from its
// system attributes (an events.SQSMessage's Attributes), "" when none. The
// worker links each record's span to it ((*Span).Link): the semantic
// conventions' rule for SQS-triggered Lambda functions, one link per message
// (https://opentelemetry.io/docs/specs/semconv/faas/aws-lambda/). X-Ray links
// its own Lambda segments to the producer by itself
// (https://docs.aws.amazon.com/xray/latest/devguide/xray-tracelinking.html);
// spans an application sends with OpenTelemetry are linked by nobody else.
func SQSTraceHeader(attrs map[string]string) string {
	return attrs[SQSTraceAttribute]
}
