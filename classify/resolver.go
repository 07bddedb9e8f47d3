package classify

// FunctionCall names one function call found in a statement, as written.
type FunctionCall struct {
	// Schema is the schema the call was qualified with, or "" when unqualified.
	Schema string
	// Name is the function name as the parser produced it (unquoted names are lower-case).
	Name string
	// Args is the number of arguments written in the call.
	Args int
}

// FunctionEffect is what a FunctionResolver knows about a function.
type FunctionEffect struct {
	// Access is Write when calling the function writes or needs the primary.
	Access Access
	// Reason is ReasonWritingFunction or ReasonUnknownEffect for a Write; ignored for a Read.
	Reason Reason
	// Session is the session state the call changes.
	Session SessionEffect
}

// FunctionResolver answers for functions that are not pg_catalog built-ins, for example from a
// per-database catalogue with analysed function bodies; ok is false when it does not know the function.
type FunctionResolver interface {
	// ResolveFunction reports the effect of calling call.
	ResolveFunction(call FunctionCall) (effect FunctionEffect, ok bool)
}
