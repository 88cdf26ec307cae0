// Package mdsection replaces one "## " section of a Markdown file
// (BENCHMARKS.md) and keeps the rest: the narrower bench targets each
// update their own section.
package mdsection
