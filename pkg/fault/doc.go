// Package fault is the leaf every layer shares for error classes: an error is
// either permanent (bad input, forbidden, unknown: retrying cannot help; 4xx
// at the edge) or it is retried (everything else; 5xx). Pure code marks its
// errors here without linking HTTP, OIDC or Kubernetes types.
//
// The edge's kinds of failure (NotFound, Unauthenticated, RateLimited,
// Conflict, ...) are here too, with the one table from a kind to its HTTP
// status and outcome label ([Status]): the intake and the API answer from
// it, so one failure gets one status wherever it is met.
package fault
