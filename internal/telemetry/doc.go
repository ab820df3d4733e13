// Package telemetry is linegate's single seam to observability: tracing,
// structured JSON logs and CloudWatch Embedded Metric Format (EMF) metrics.
//
// Tracing. The cores (webhook, worker, notifier) trace with neutral verbs —
// Start, StartAWSCall and StartInvocation to begin a span, (*Span).Link to
// link it to the trace that caused it, Annotate and Metadata for attributes,
// End and Panic to end it — and hand work off with TraceHeader (the
// TraceHeader of PutEvents entries, the AWSTraceHeader of SQS messages:
// SQSTraceAttribute). Behind the verbs a Backend records the spans:
// internal/telemetry/xraytrace, the AWS X-Ray SDK, by default, or
// internal/telemetry/otelxray, OpenTelemetry sending OTLP to the X-Ray
// daemon, with TRACING=otel. The composition root picks one (SetDefault in
// a function's main, WithBackend per invocation in `linegate local`); the
// cores never see which, and X-Ray's trace-header format (Header,
// ParseTraceHeader, FormatTraceID) stays in here.
//
// This package imports neither tracing SDK and declares no init function,
// so the many packages that merely log link neither and change nothing by
// importing it. The files follow the split: backend.go holds the Backend
// contract and where a context's backend comes from, trace.go the verbs,
// header.go the X-Ray trace header and the invoke's header, sqs.go the SQS
// attribute, stack.go panics' frames, log.go the logs, emf.go and
// recorder.go the metrics.
//
// Every tracing call is a safe no-op when the context carries no trace (unit
// tests, local runs without a collector): no panic, no log noise.
//
// Invocations. In Lambda the trace header of each invoke is in its context
// (InvokeHeader), put there by aws-lambda-go; _X_AMZN_TRACE_ID is never
// read, since aws-lambda-go v1.51.0 no longer sets it per invoke when
// invokes run concurrently. The span of an invocation (StartInvocation)
// flushes the backend when it ends: a sandbox may freeze as soon as the
// handler returns.
//
// Cross-trace links. The worker's trace is linked to the webhook's trace, not
// merged into it: (*Span).Link records the upstream span as the annotations
// "upstreamTraceId" and "upstreamParentId" (indexed by X-Ray under either
// backend, so the console filter `annotation.upstreamTraceId = "1-..."` finds
// every downstream trace of one webhook) and, under OpenTelemetry, as a
// native span link too. The local collector (internal/xraycollector) turns
// both into the "links" of its JSON view.
package telemetry
