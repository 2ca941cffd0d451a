package amplifier

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ctxstore/ctxstore"
	pb "github.com/ctxstore/ctxstore/amplifier/amplifierpb"
	"github.com/ctxstore/ctxstore/persistent"
	"github.com/ctxstore/ctxstore/storage"
)

// MountFunc opens the manager a Mount asks for, from the Mount's config
// map and module id. Its error, when it matches ctxstore.ErrInvalidConfig
// or ctxstore.ErrInvalidMessage, reaches the host as INVALID_ARGUMENT.
type MountFunc func(ctx context.Context, req *pb.MountRequest) (ctxstore.Manager, error)

// Static returns a MountFunc for a manager opened beforehand: Mount
// accepts it with an empty config and refuses any key.
func Static(m ctxstore.Manager) MountFunc {
	return func(_ context.Context, req *pb.MountRequest) (ctxstore.Manager, error) {
		for k := range req.GetConfig() {
			return nil, &ctxstore.ConfigError{Field: k, Reason: "this module was configured when it started and takes no Mount config"}
		}
		return m, nil
	}
}

// ProviderSelector is implemented by managers that count tokens as the
// request's provider does. The server calls UseProvider before a view for
// a request that names its provider.
type ProviderSelector interface {
	UseProvider(ctx context.Context, provider string) error
}

// HealthChecker is implemented by managers that can tell whether their
// store answers; HealthCheck reports its error as NOT_SERVING.
type HealthChecker interface {
	Health(ctx context.Context) error
}

// Server serves a ctxstore.Manager as Amplifier's ContextService and
// ModuleLifecycle. One server serves one session: the protocol's requests
// name none. Until Mount succeeds (and after Cleanup) the context calls
// fail with FAILED_PRECONDITION.
type Server struct {
	pb.UnimplementedContextServiceServer
	pb.UnimplementedModuleLifecycleServer

	mount  MountFunc
	info   *pb.ModuleInfo
	logger *slog.Logger

	mounting sync.Mutex // serializes Mount, Cleanup and Close
	mu       sync.RWMutex
	m        ctxstore.Manager

	protos protoCache
}

// Options configure a Server. The zero Options are valid.
type Options struct {
	// Info is what GetModuleInfo returns; nil = ctxstore's own.
	Info *pb.ModuleInfo
	// Logger receives the failures the host cannot fix by changing its
	// request (UNAVAILABLE, DATA_LOSS, INTERNAL), for the operator; nil =
	// silent.
	Logger *slog.Logger
}

// NewServer returns a server whose Mount opens its manager with mount.
func NewServer(mount MountFunc, opts Options) *Server {
	s := &Server{mount: mount, info: opts.Info, logger: opts.Logger}
	if s.info == nil {
		s.info = DefaultInfo()
	}
	if s.logger == nil {
		s.logger = slog.New(slog.DiscardHandler)
	}
	return s
}

// Register registers both services on r (a *grpc.Server).
func (s *Server) Register(r grpc.ServiceRegistrar) {
	pb.RegisterContextServiceServer(r, s)
	pb.RegisterModuleLifecycleServer(r, s)
}

// Manager returns the mounted manager, or nil before Mount.
func (s *Server) Manager() ctxstore.Manager {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.m
}

// Close unmounts: it closes the mounted manager when it is an io.Closer.
// It is what Cleanup does, for a host process stopping on its own (a
// signal), and it is idempotent.
func (s *Server) Close() error {
	s.mounting.Lock()
	defer s.mounting.Unlock()
	s.mu.Lock()
	m := s.m
	s.m = nil
	s.mu.Unlock()
	if c, ok := m.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Mount opens the manager. A second Mount without Cleanup in between is
// refused: one server serves one session.
func (s *Server) Mount(ctx context.Context, req *pb.MountRequest) (*pb.MountResponse, error) {
	s.mounting.Lock()
	defer s.mounting.Unlock()
	if s.Manager() != nil {
		return nil, status.Error(codes.FailedPrecondition, "already mounted: one module process serves one session; call Cleanup before mounting again")
	}
	m, err := s.mount(ctx, req)
	if err != nil {
		return nil, s.fail(fmt.Errorf("mount: %w", err))
	}
	s.mu.Lock()
	s.m = m
	s.mu.Unlock()
	return &pb.MountResponse{Success: true, Status: pb.HealthStatus_HEALTH_STATUS_SERVING}, nil
}

// Cleanup closes the mounted manager (nothing to do before Mount).
func (s *Server) Cleanup(ctx context.Context, _ *pb.Empty) (*pb.Empty, error) {
	if err := s.Close(); err != nil {
		return nil, s.fail(fmt.Errorf("cleanup: %w", err))
	}
	return &pb.Empty{}, nil
}

// HealthCheck reports SERVING when a manager is mounted and, if it can
// tell, its store answers (with the session's name when the manager has a
// Name method); NOT_SERVING with the reason otherwise.
func (s *Server) HealthCheck(ctx context.Context, _ *pb.Empty) (*pb.HealthCheckResponse, error) {
	m := s.Manager()
	if m == nil {
		return &pb.HealthCheckResponse{Status: pb.HealthStatus_HEALTH_STATUS_NOT_SERVING, Message: "not mounted: call Mount first"}, nil
	}
	if h, ok := m.(HealthChecker); ok {
		if err := h.Health(ctx); err != nil {
			return &pb.HealthCheckResponse{Status: pb.HealthStatus_HEALTH_STATUS_NOT_SERVING, Message: err.Error()}, nil
		}
	}
	msg := "serving"
	if n, ok := m.(interface{ Name() string }); ok {
		msg = "serving session " + n.Name()
	}
	return &pb.HealthCheckResponse{Status: pb.HealthStatus_HEALTH_STATUS_SERVING, Message: msg}, nil
}

// GetModuleInfo returns the module's description.
func (s *Server) GetModuleInfo(context.Context, *pb.Empty) (*pb.ModuleInfo, error) {
	return s.info, nil
}

// mounted returns the manager, or FAILED_PRECONDITION before Mount.
func (s *Server) mounted() (ctxstore.Manager, error) {
	m := s.Manager()
	if m == nil {
		return nil, status.Error(codes.FailedPrecondition, "not mounted: call ModuleLifecycle.Mount before the context calls")
	}
	return m, nil
}

// AddMessage stores one message.
func (s *Server) AddMessage(ctx context.Context, req *pb.AddMessageRequest) (*pb.Empty, error) {
	m, err := s.mounted()
	if err != nil {
		return nil, err
	}
	msg, err := ProtoToMessage(req.GetMessage())
	if err != nil {
		return nil, s.fail(fmt.Errorf("add message: %w", err))
	}
	if err := m.AddMessage(ctx, msg); err != nil {
		return nil, s.fail(fmt.Errorf("add message: %w", err))
	}
	return &pb.Empty{}, nil
}

// GetMessages returns the full history of the current epoch.
func (s *Server) GetMessages(ctx context.Context, _ *pb.Empty) (*pb.GetMessagesResponse, error) {
	m, err := s.mounted()
	if err != nil {
		return nil, err
	}
	ms, err := m.GetMessages(ctx)
	if err != nil {
		return nil, s.fail(fmt.Errorf("get messages: %w", err))
	}
	return s.response(ms), nil
}

// GetMessagesForRequest returns the view for one model request. A
// token_budget of 0 means none (the manager's model or fallback budget
// applies); provider_name, when the manager is a ProviderSelector, picks
// the token counter.
func (s *Server) GetMessagesForRequest(ctx context.Context, req *pb.GetMessagesForRequestParams) (*pb.GetMessagesResponse, error) {
	m, err := s.mounted()
	if err != nil {
		return nil, err
	}
	if req.GetTokenBudget() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "get messages for request: token_budget is negative (%d); 0 means none", req.GetTokenBudget())
	}
	if ps, ok := m.(ProviderSelector); ok && req.GetProviderName() != "" {
		if err := ps.UseProvider(ctx, req.GetProviderName()); err != nil {
			return nil, s.fail(fmt.Errorf("get messages for request: provider %q: %w", req.GetProviderName(), err))
		}
	}
	ms, err := m.GetMessagesForRequest(ctx, ctxstore.Request{TokenBudget: int(req.GetTokenBudget())})
	if err != nil {
		return nil, s.fail(fmt.Errorf("get messages for request: %w", err))
	}
	return s.response(ms), nil
}

// SetMessages replaces the history; a resumed persistent session ignores
// it (its own log is authoritative).
func (s *Server) SetMessages(ctx context.Context, req *pb.SetMessagesRequest) (*pb.Empty, error) {
	m, err := s.mounted()
	if err != nil {
		return nil, err
	}
	ms := make([]ctxstore.Message, len(req.GetMessages()))
	for i, p := range req.GetMessages() {
		if ms[i], err = ProtoToMessage(p); err != nil {
			return nil, s.fail(fmt.Errorf("set messages: messages[%d]: %w", i, err))
		}
	}
	if err := m.SetMessages(ctx, ms); err != nil {
		return nil, s.fail(fmt.Errorf("set messages: %w", err))
	}
	return &pb.Empty{}, nil
}

// Clear empties the current history (a persistent manager starts a new
// epoch; earlier ones stay readable).
func (s *Server) Clear(ctx context.Context, _ *pb.Empty) (*pb.Empty, error) {
	m, err := s.mounted()
	if err != nil {
		return nil, err
	}
	if err := m.Clear(ctx); err != nil {
		return nil, s.fail(fmt.Errorf("clear: %w", err))
	}
	return &pb.Empty{}, nil
}

func (s *Server) response(ms []ctxstore.Message) *pb.GetMessagesResponse {
	out := &pb.GetMessagesResponse{Messages: make([]*pb.Message, len(ms))}
	for i, m := range ms {
		out.Messages[i] = s.protos.get(m)
	}
	return out
}

// fail turns err into the status the host gets, logging the failures the
// host cannot fix by changing its request.
func (s *Server) fail(err error) error {
	st := toStatus(err)
	switch status.Code(st) {
	case codes.Unavailable, codes.DataLoss, codes.Internal:
		s.logger.Error("request failed", "code", status.Code(st).String(), "err", err)
	}
	return st
}

// toStatus gives err the gRPC code a host can act on: INVALID_ARGUMENT for
// a bad message or config, UNAVAILABLE when the store is closed, locked or
// unreachable, FAILED_PRECONDITION for a read-only store, DATA_LOSS for a
// damaged one.
func toStatus(err error) error {
	code := codes.Internal
	var ne net.Error
	switch {
	case errors.Is(err, ctxstore.ErrInvalidMessage), errors.Is(err, ctxstore.ErrInvalidConfig),
		errors.Is(err, persistent.ErrMemoryTooLarge):
		code = codes.InvalidArgument
	case errors.Is(err, storage.ErrClosed), errors.Is(err, persistent.ErrClosed),
		errors.Is(err, storage.ErrLocked), errors.Is(err, storage.ErrOutcomeUnknown), errors.As(err, &ne):
		code = codes.Unavailable
	case errors.Is(err, storage.ErrReadOnly):
		code = codes.FailedPrecondition
	case errors.Is(err, storage.ErrCorrupt):
		code = codes.DataLoss
	case errors.Is(err, context.Canceled):
		code = codes.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		code = codes.DeadlineExceeded
	}
	return status.Error(code, err.Error())
}
