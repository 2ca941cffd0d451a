package tokens

// estimateText is the heuristic's text estimate.
func estimateText(b []byte) int { return (len(b) + 3) / 4 }
