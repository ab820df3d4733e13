// Package telemetry is linegate's single seam to observability: X-Ray tracing,
// structured JSON logs and CloudWatch Embedded Metric Format (EMF) metrics.
//
// It is the only package that imports the AWS X-Ray SDK for Go v2 (whose
// support ends 2027-02-25), so tracing can move to OpenTelemetry by rewriting
// this package alone: the cores (webhook, worker, notifier) call
// StartSubsegment, TraceHeader, TraceID, NewLogger and the Recorder port, and
// never see the SDK. The files follow that split: trace.go holds spans and
// trace ids, clients.go the instrumentation of AWS and HTTP clients,
// tracer.go where segments go (Configure, NewTracer), header.go the X-Ray
// trace header, log.go the logs, emf.go and recorder.go the metrics.
//
// Where segments go. In Lambda nothing needs configuring: the SDK sends to the
// daemon at AWS_XRAY_DAEMON_ADDRESS and the invocation's facade segment comes
// from the context aws-lambda-go builds. Code that starts its own segments
// outside Lambda (linegate local) carries its configuration in the context
// instead, with a Tracer: two local runtimes, or a test and a runtime, in one
// process each send to their own collector. Configure, which changes the
// process-wide default, is for a main that owns the whole process.
//
// Every tracing call is a safe no-op when the context carries no segment (unit
// tests, local runs without a collector): no panic, no "segment cannot be
// found" log noise.
//
// Cross-trace links. The worker's trace is linked to the webhook's trace, not
// merged into it: (*Span).Link records the upstream trace as the annotations
// "upstreamTraceId" and "upstreamParentId" (annotations are indexed by X-Ray,
// so the console filter `annotation.upstreamTraceId = "1-..."` finds every
// downstream trace of one webhook). The v2 SDK's segment document has no
// "links" member, so annotations are the representation; the local collector
// (internal/xraycollector) turns them, and any native "links" member a future
// OpenTelemetry emitter sends, into the "links" of its JSON view.
package telemetry
