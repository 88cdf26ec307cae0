// Package otlptest is an OTLP/HTTP traces receiver for tests: a real HTTP
// server on loopback that decodes what an exporter posts (protobuf, gzip
// or not) and keeps the spans.
package otlptest
