// Package identity is who a request comes from: the [Principal] the API's
// authentication (pkg/api) finds for it and puts in the request's
// context, and what the handlers record a control as. It is domain: values
// and pure rules, no adapter, no edge (docs/design/identity.md, #31).
package identity
