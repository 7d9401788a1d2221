package admission

// Cost is the units the request takes from each of the rule's limits, as Admit charges them, and
// false for a cost header that is not a whole number (the request is answered 400 and charged
// nothing). tollgate simulate uses it for keys' peak rates in the limits' own units.
func (g *Gate) Cost(req Request, rule int) (int64, bool) {
	return ruleCost(req, &g.rules[rule].cost)
}
