// Package functions groups flotilla's stateless event handlers, one package
// each (verify, plan, launch, observe, advance, rollback). Each handler has the
// signature Handle(ctx, event) and declares, in its doc.go, the event types it
// consumes and emits.
package functions
