package awswire

// Operations lists every operation s serves, as "Service.Op", sorted.
func Operations(s *Server) []string { return s.operations() }

// WithAnswered lets a test see each operation's output before it is
// encoded.
func WithAnswered(f func(service, op string, out any)) Option {
	return func(s *Server) { s.answered = f }
}
