// Package telemetry is linegate's single seam to observability: X-Ray tracing,
// structured JSON logs and CloudWatch Embedded Metric Format (EMF) metrics.
//
// It is the only package that imports the AWS X-Ray SDK (whose support ends
// 2027-02-25), so tracing can move to OpenTelemetry by rewriting this package
// alone: the cores (webhook, worker, notifier) call StartSubsegment,
// TraceHeader, TraceID, NewLogger and NewMetrics and never see the SDK.
//
// Two builds. By default tracing is the AWS X-Ray SDK for Go v2 (segments,
// awsv2.AWSV2Instrumentor for SDK clients, xray.Client for HTTP). With the
// build tag xraylite — the webhook Lambda's build — the same API is served by
// a small emitter that writes segment documents to the X-Ray daemon over UDP
// itself: the SDK's core package imports grpc and fasthttp (about 10 MB of
// binary and milliseconds of init) that the webhook, which LINE waits on,
// does not need. Both builds pass the same tests against the collector.
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
// (package collector) turns them, and any native "links" member a future
// OpenTelemetry emitter sends, into the "links" of its JSON view.
package telemetry
