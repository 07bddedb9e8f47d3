package classify

import "slices"

// Merge gives the effects of several statements that run as one unit: the
// statements of one SQL string, or the statements of one extended-protocol
// batch. It is the only rule for combining effects:
//   - the unit only reads when every part reads; otherwise the first part that
//     writes gives Access, Reason, Subject, Chain and Detail;
//   - among reads, the first part whose read has a reason other than
//     READ_ONLY (OVERRIDE, HINT) gives Reason and Subject, since the unit
//     reads only because of it;
//   - Tx is the first part's transaction control that is not TxNone, and
//     Transaction is that part's; EndsBlock is set when any part has it;
//   - Settings, Prepares and UsesPrepared are the parts' in order, DiscardsSequences is set when
//     any part has it;
//   - Session, SetConfigNames and Warnings are unions, CatalogueChange is set
//     when any part has it (CatalogueChanges, Assumptions and a read's RestsOn
//     are unions too), and Statements is the sum;
//   - SearchPath, Pgowl, Deallocates, Loads and CatalogueChanges.Created describe a single statement:
//     they are kept only when there is one part;
//   - Fingerprint, Normalized and ParseError are the first part's.
//
// With no parts the unit is a read of no statements with an empty Subject.
// A part may be given more than once only if it runs more than once.
func Merge(parts []Effects) Effects {
	merged := Effects{Access: Read, Reason: ReasonReadOnly}
	for i := range parts {
		part := &parts[i]
		if i == 0 {
			merged.Access, merged.Reason, merged.Subject = part.Access, part.Reason, part.Subject
			merged.Chain, merged.Detail = part.Chain, part.Detail
			merged.Fingerprint, merged.Normalized, merged.ParseError, merged.labels = part.Fingerprint, part.Normalized, part.ParseError, part.labels
		} else {
			switch {
			case part.Access == Write && merged.Access == Read:
				merged.Access, merged.Reason, merged.Subject = Write, part.Reason, part.Subject
				merged.Chain, merged.Detail = part.Chain, part.Detail
			case part.Access == Read && merged.Access == Read && merged.Reason == ReasonReadOnly && part.Reason != ReasonReadOnly:
				merged.Reason, merged.Subject = part.Reason, part.Subject
			}
		}
		if merged.Tx == TxNone {
			merged.Tx, merged.Transaction = part.Tx, part.Transaction
		}
		merged.EndsBlock = merged.EndsBlock || part.EndsBlock
		if len(part.Settings) > 0 {
			merged.Settings = append(merged.Settings[:len(merged.Settings):len(merged.Settings)], part.Settings...)
		}
		merged.DiscardsSequences = merged.DiscardsSequences || part.DiscardsSequences
		if len(part.Prepares) > 0 {
			merged.Prepares = append(merged.Prepares[:len(merged.Prepares):len(merged.Prepares)], part.Prepares...)
		}
		if len(part.UsesPrepared) > 0 {
			merged.UsesPrepared = append(merged.UsesPrepared[:len(merged.UsesPrepared):len(merged.UsesPrepared)], part.UsesPrepared...)
		}
		merged.Session |= part.Session
		merged.CatalogueChange = merged.CatalogueChange || part.CatalogueChange
		if part.CatalogueChanges != nil {
			merged.CatalogueChanges = mergeChanges(merged.CatalogueChanges, part.CatalogueChanges)
		}
		for _, assumption := range part.Assumptions {
			if !slices.Contains(merged.Assumptions, assumption) {
				merged.Assumptions = append(merged.Assumptions, assumption)
			}
		}
		merged.RestsOnAll = merged.RestsOnAll || part.RestsOnAll
		switch {
		case merged.RestsOnAll:
		case len(merged.RestsOn) == 0:
			merged.RestsOn = part.RestsOn // shared: never appended to in place
		case len(merged.RestsOn)+len(part.RestsOn) > maxRestsOn:
			merged.RestsOn, merged.RestsOnAll = nil, true
		default:
			merged.RestsOn = sortedOnce(slices.Concat(merged.RestsOn, part.RestsOn))
		}
		merged.SetConfigNames = mergeNames(merged.SetConfigNames, part.SetConfigNames)
		for _, warning := range part.Warnings {
			if !slices.Contains(merged.Warnings, warning) {
				merged.Warnings = appendWarning(merged.Warnings, warning)
			}
		}
		merged.Statements += part.Statements
	}
	if len(parts) == 1 {
		// One statement's change keeps what only one statement's may hold (Created).
		merged.CatalogueChanges = parts[0].CatalogueChanges
		merged.SearchPath, merged.Pgowl = parts[0].SearchPath, parts[0].Pgowl
		merged.Deallocates, merged.Loads = parts[0].Deallocates, parts[0].Loads
	}
	if merged.Access == Write {
		// A declaration's word, and what a verdict rests on, matter only to a read.
		merged.Assumptions = nil
		merged.RestsOn, merged.RestsOnAll = nil, false
	} else if merged.RestsOnAll {
		merged.RestsOn = nil
	}
	return merged
}
