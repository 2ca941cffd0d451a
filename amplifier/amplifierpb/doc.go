// Package amplifierpb is the generated Go code of the part of Amplifier's
// module protocol (gRPC package amplifier.module) that a context module
// speaks: the ContextService and ModuleLifecycle services and their
// messages. Package amplifier serves them; hosts and tests use the client
// stubs here.
//
// Do not edit the .pb.go files: change amplifier_module.proto and run
// go generate.
package amplifierpb

//go:generate sh generate.sh
