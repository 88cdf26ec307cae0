// Package fault is the leaf every layer shares for error classes: an error is
// either permanent (bad input, forbidden, unknown: retrying cannot help; 4xx
// at the edge) or it is retried (everything else; 5xx). Pure code marks its
// errors here without linking HTTP, OIDC or Kubernetes types.
package fault
