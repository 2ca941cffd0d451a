package simple

import (
	"github.com/ctxstore/ctxstore"
	"github.com/ctxstore/ctxstore/internal/tokens"
)

// DefaultEstimator returns the estimator used when Config.Estimator is nil:
// about one token per 4 bytes of a message's JSON, and a flat 1600 tokens
// per image, audio, document or file block, never their base64 length.
func DefaultEstimator() ctxstore.Estimator { return tokens.Default() }

// CalibratedEstimator scales an estimator by the ratio of real to estimated
// tokens that the host reports after responses (Report(estimated, actual)
// with the provider's usage). Managers keep each message's estimate from
// when it was added, so calibration affects messages added afterwards.
//
// Its methods (documented on the internal type it aliases):
//
//	Estimate(m ctxstore.Message) int      // the base estimate × Ratio
//	Report(estimated, actual int)          // moves Ratio a quarter of the way towards actual/estimated
//	Ratio() float64                        // the current ratio, within [0.25, 4]
//
// It is safe for concurrent use.
type CalibratedEstimator = tokens.Calibrated

// NewCalibratedEstimator wraps base (nil = DefaultEstimator) for
// calibration; pass it as Config.Estimator and keep it to call Report.
func NewCalibratedEstimator(base ctxstore.Estimator) *CalibratedEstimator {
	return tokens.NewCalibrated(base)
}
