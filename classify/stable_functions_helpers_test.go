package classify

// catalogueWithStableFunctions is the test catalogue with one STABLE function per body, named
// prefix and the body's key, in language, returning result, with OIDs from after firstOID.
func catalogueWithStableFunctions(prefix, language, result string, firstOID uint32, bodies map[string]string) *Catalogue {
	data := *testCatalogue().Data()
	oid := firstOID
	for name, body := range bodies {
		oid++
		data.Functions = append(data.Functions, Function{OID: oid, Schema: "public", Name: prefix + name, Language: language,
			Volatility: 's', Kind: 'f', Result: result, Source: body})
	}
	return NewCatalogue(data)
}
