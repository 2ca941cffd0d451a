// Package amplifier serves ctxstore to Amplifier, Microsoft's modular agent
// framework, as a context module over gRPC: the kernel spawns the module
// binary (cmd/ctxstore-amplifier) or connects to it, and talks to it
// through the protocol's ContextService and ModuleLifecycle exactly as to
// any context module.
//
// Server serves any ctxstore.Manager; Session is the one the binary
// mounts, a persistent session that picks its token counter by the
// request's provider and reports its store's health. ProtoToMessage and
// MessageToProto convert between the protocol's typed Message and
// ctxstore's JSON without losing anything the protocol carries; a message
// that has no typed form (OpenAI "tool_calls", say) goes to the host in
// the protocol's untyped form, its JSON byte for byte. A grpc.Server
// created with a Server's ServerOptions sends views from each message's
// cached encoding (the same bytes on the wire, less work per request).
//
// One server serves one session, since the protocol's requests name none:
// a host holding several conversations runs a module process for each.
//
// docs/amplifier.md says how to run the module and configure it.
package amplifier
