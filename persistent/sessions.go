package persistent

import (
	"context"
	"fmt"

	"github.com/ctxstore/ctxstore/storage"
)

// Sessions lists every session in the manager's store (the file, or the
// engine given to OpenEngine), ordered by name, with each one's metadata:
// epoch, message and token counts of the current epoch, creation and last
// change, title. It reads no message bodies. The manager's own session is
// listed once it has been written to.
func (m *Manager) Sessions(ctx context.Context) ([]storage.SessionInfo, error) {
	if err := m.lock(); err != nil {
		return nil, err
	}
	defer m.mu.Unlock() // Close waits: the store stays open while it is read
	infos, err := m.st.Sessions(ctx)
	if err != nil {
		return nil, fmt.Errorf("persistent: list the sessions of %s: %w", m.st.Location(), err)
	}
	return infos, nil
}
