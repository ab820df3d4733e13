package crash

import (
	"regexp"
	"strings"
)

// Redacted replaces every secret and token-shaped string Scrub removes.
const Redacted = "[REDACTED]"

// MinSecretLen is the shortest explicit secret Scrub replaces: shorter values
// ("abc", "1") would eat ordinary text and protect nothing.
const MinSecretLen = 6

var (
	// "Bearer <token>" in headers or error texts: keep the scheme word, drop the token.
	bearerRE = regexp.MustCompile(`(?i)\b(bearer)(\s+)[A-Za-z0-9\-._~+/]+=*`)
	// x-line-signature values as a header dump, JSON or a printed http.Header
	// (`X-Line-Signature:[abc=]`) shows them.
	signatureRE = regexp.MustCompile(`(?i)(x-line-signature["']?\s*[:=]\s*["'\[]?\s*)[A-Za-z0-9+/]+=*`)
	// AWS access key IDs (long-term AKIA, temporary ASIA).
	accessKeyRE = regexp.MustCompile(`\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`)
	// JWTs (channel access tokens v2.1 and assertion JWTs).
	jwtRE = regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`)
)

// Scrub returns s with secrets removed, for anything that leaves the process
// (crash reports, logs). It replaces with Redacted:
//   - every occurrence of each given secret at least MinSecretLen bytes long
//     (where two secrets overlap, both are removed whole);
//   - the token after "Bearer ";
//   - x-line-signature values;
//   - AWS access key IDs (AKIA/ASIA + 16);
//   - JWTs;
//   - token-shaped runs of base64 characters [A-Za-z0-9+/] (plus "=" padding):
//     runs of exactly 32 or of 40 and more hex digits (LINE channel secrets
//     are 32 hex; a group ID, "C" + 32 hex, is kept), and
//     runs of 40 or more characters mixing upper case, lower case and a digit
//     or "+" (LINE channel access tokens, AWS secret access keys).
//
// It is pragmatic, not a guarantee: a Go stack trace survives intact because
// hex addresses (0xc000123456) are short and contain "x", and a long run that
// is part of a dotted name (a module path before ".(", a file before ".go")
// is never taken for a token.
func Scrub(s string, secrets ...string) string {
	s = scrubSecrets(s, secrets)
	s = bearerRE.ReplaceAllString(s, "${1}${2}"+Redacted)
	s = signatureRE.ReplaceAllString(s, "${1}"+Redacted)
	s = accessKeyRE.ReplaceAllString(s, Redacted)
	s = jwtRE.ReplaceAllString(s, Redacted)
	return scrubRuns(s)
}

// scrubSecrets replaces every byte range covered by an occurrence of any
// secret, so two overlapping secrets never leave a fragment behind. Each
// secret is searched without overlap (like strings.ReplaceAll), which keeps
// the cost linear in len(s) per secret.
func scrubSecrets(s string, secrets []string) string {
	var covered []bool
	for _, sec := range secrets {
		if len(sec) < MinSecretLen {
			continue
		}
		for from := 0; ; {
			i := strings.Index(s[from:], sec)
			if i < 0 {
				break
			}
			if covered == nil {
				covered = make([]bool, len(s))
			}
			start := from + i
			for j := start; j < start+len(sec); j++ {
				covered[j] = true
			}
			from = start + len(sec)
		}
	}
	if covered == nil {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); {
		if !covered[i] {
			b.WriteByte(s[i])
			i++
			continue
		}
		b.WriteString(Redacted)
		for i < len(s) && covered[i] {
			i++
		}
	}
	return b.String()
}

// scrubRuns replaces token-shaped maximal runs of base64 characters.
func scrubRuns(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); {
		if !isRunByte(s[i]) {
			i++
			continue
		}
		start := i
		for i < len(s) && isRunByte(s[i]) {
			i++
		}
		core := i
		for i < len(s) && s[i] == '=' {
			i++
		}
		if tokenShaped(s[start:core], s[:start], s[i:]) {
			b.WriteString(s[last:start])
			b.WriteString(Redacted)
			last = i
		}
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

func isRunByte(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/'
}

// tokenShaped reports whether run (without "=" padding) looks like a secret;
// before and after are the text around it.
func tokenShaped(run, before, after string) bool {
	if len(run) < 32 {
		return false
	}
	var upper, lower, digit, plus, hex int
	for i := 0; i < len(run); i++ {
		c := run[i]
		switch {
		case 'A' <= c && c <= 'Z':
			upper++
		case 'a' <= c && c <= 'z':
			lower++
		case '0' <= c && c <= '9':
			digit++
		case c == '+':
			plus++
		}
		if '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F' {
			hex++
		}
	}
	if hex == len(run) && (len(run) == 32 || len(run) >= 40) {
		// A channel secret (32 hex) or a longer hex key. 33 hex digits are a
		// LINE group ID ("C" + 32 hex), kept for debugging.
		return true
	}
	if len(run) < 40 || dotted(before, after) {
		return false
	}
	return upper > 0 && lower > 0 && (digit > 0 || plus > 0)
}

// dotted reports whether a run is one part of a dotted name: a Go module or
// package path ("github.com/Org2/Repo/pkg.(*T).M"), a source file
// ("/src/App2/handlers.go") or a qualified identifier. A token ending a
// sentence ("... token abc.") is not: the dot must be followed by a name.
func dotted(before, after string) bool {
	if strings.HasSuffix(before, ".") {
		return true
	}
	if len(after) < 2 || after[0] != '.' {
		return false
	}
	c := after[1]
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '(' || c == '*' || c == '_'
}
