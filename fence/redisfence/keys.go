package redisfence

import (
	"fmt"
	"strings"

	"github.com/dlockio/dlock"
)

// FenceKey returns the key that holds the high-water mark of data key key,
// in the same Redis Cluster slot (see the package documentation for the
// layout). It fails, matching dlock.ErrInvalidKey, for an empty key and for
// a key without a hash tag that contains '}'.
func FenceKey(key string) (string, error) {
	if key == "" {
		return "", fmt.Errorf("%w: empty", dlock.ErrInvalidKey)
	}
	if hasHashTag(key) {
		return "dlock:fence:" + key, nil
	}
	if strings.Contains(key, "}") {
		// "{" + key + "}" would end the tag at key's '}', not at ours.
		return "", fmt.Errorf("%w: %q has no hash tag but contains '}', so its mark cannot share its Cluster slot", dlock.ErrInvalidKey, key)
	}
	return "dlock:fence{" + key + "}", nil
}

// hasHashTag reports whether Redis Cluster hashes key by a tag: the text
// between its first '{' and the first '}' after it, if not empty.
func hasHashTag(key string) bool {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return false
	}
	j := strings.IndexByte(key[i+1:], '}')
	return j > 0
}
