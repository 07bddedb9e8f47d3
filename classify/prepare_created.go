package classify

// PrepareCreated parses ahead what the first analysis of obj, a function its CREATE statement
// made in the context ctx, will parse: its SQL body, or its PL/pgSQL body with the statements and
// expressions in it. The parses are kept across catalogues (Classifier.bodies, Classifier.plpgsql), so the
// statement that calls the function right after it is made, as a migration does, finds them done
// and has only the analysis left. The proxy calls it while the node runs the CREATE statement,
// when it would otherwise wait, where it cannot prepare the catalogue with the function taken in
// (catalog.Manager.PrepareTake); where it can, PrepareUses does the analysis itself, parsing what
// it needs. Nothing else changes: a body that does not parse is parsed, and
// reported, when it is analysed; other objects have nothing to parse ahead (a view's query was
// parsed with its statement).
func (c *Classifier) PrepareCreated(obj CreatedObject, ctx *Context) {
	created, ok := obj.(*CreatedFunction)
	if !ok || c.catalogues == nil || ctx == nil || ctx.Database == "" {
		return
	}
	cat, _ := c.catalogues.Held(ctx.Database)
	if cat == nil {
		return
	}
	// The function as the catalogue will take it: its CREATE statement for the PL/pgSQL parser
	// is made from the same row. Its OID plays no part in what is parsed.
	next := uint32(0)
	f, ok := cat.CreatedFunction(created, ctx, func() uint32 { next++; return next })
	if !ok {
		return
	}
	switch f.Language {
	case "sql":
		c.bodies.parse(f.Source)
	case "plpgsql":
		if root, _ := c.plpgsqlParse(createStatement(&f)); root != nil {
			c.parseExpressions(root, 0)
		}
	}
}

// parseExpressions parses the SQL texts of the PLpgSQL_expr nodes under n, as plWalker.expression
// will when it analyses them.
func (c *Classifier) parseExpressions(n *jsonNode, depth int) {
	if n == nil || depth > maxJSONDepth {
		return
	}
	for i, key := range n.keys {
		if key == "PLpgSQL_expr" {
			texts, _ := expressionTexts(n.values[i])
			for _, text := range texts {
				c.bodies.parse(text)
			}
			continue
		}
		c.parseExpressions(n.values[i], depth+1)
	}
	if n.array {
		for _, value := range n.values {
			c.parseExpressions(value, depth+1)
		}
	}
}

// PrepareUses analyses, in cat, the objects taken (the rows a statement made, as
// Catalogue.TakeCreated gives them, taken into cat): each function's effect and each view's, as
// a statement of a session in ctx that calls the function or reads the view analyses them,
// memoised in cat. The statement that uses the object right after it is made, as a migration
// does, then finds its analysis done and has only its own parse and a lookup left. The proxy
// calls it while the node runs the CREATE statement, with the catalogue it will store once the
// statement has committed (catalog.Manager.PrepareTake); nothing changes when it is never
// stored. An analysis that fails is left to the statement that needs it, which reports it.
func (c *Classifier) PrepareUses(cat *Catalogue, taken *CatalogueData, ctx *Context) {
	if cat == nil || taken == nil {
		return
	}
	defer func() { _ = recover() }()
	for i := range taken.Functions {
		if f, ok := cat.Function(taken.Functions[i].OID); ok {
			c.newAnalysis(ctx, cat).functionEffect(f)
		}
	}
	for i := range taken.Views {
		if v, ok := cat.views.get(qualified{taken.Views[i].Schema, taken.Views[i].Name}); ok {
			c.newAnalysis(ctx, cat).viewEffect(v)
		}
	}
}
