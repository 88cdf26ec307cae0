// Package registry resolves image tags to digests at an OCI registry.
//
// Resolver is the one-method contract the rest of flotilla uses; Remote
// implements it with go-containerregistry. A registry push webhook only says
// that a tag moved, so flotilla asks the registry what the tag points at now
// and carries that digest, never the tag, through the fleet.
//
// Errors are classified with package events: an image, tag or repository
// that does not exist and a request the registry refuses (4xx such as 404
// MANIFEST_UNKNOWN / NAME_UNKNOWN, 401, 403) are permanent; network errors,
// timeouts, 408, 429 and 5xx are retryable.
package registry
