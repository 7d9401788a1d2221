package config

import (
	"strconv"
)

func (v *validator) rules(path string, value *jsonValue) []Rule {
	var rules []Rule
	ruleIndexByName := make(map[string]int)
	for i, item := range v.listItems(path, value, maxRules, "rules", "rules is a list of rule objects such as ["+exampleRule+"]",
		"add a rule such as "+exampleRule) {
		rules = append(rules, v.rule(indexPath(path, i), item, i, ruleIndexByName))
	}
	return rules
}

func (v *validator) rule(path string, value *jsonValue, index int, ruleIndexByName map[string]int) Rule {
	rule := Rule{
		MissingKey: MissingKey{Action: MissingKeyReject, Status: defaultMissingKeyStatus},
		Cost:       Cost{Units: defaultCostUnits},
	}
	if !v.wantKind(path, value, kindObject, `a rule is an object with "name", "key" and "limits", e.g. `+exampleRule) {
		return rule
	}
	v.checkFieldNames(path, value, ruleFields)
	if name := v.required(value, path, "name", `"per-api-key"`); name != nil {
		rule.Name = v.ruleName(fieldPath(path, "name"), name, index, ruleIndexByName)
	}
	if match := value.member("match"); match != nil {
		rule.Match = v.match(fieldPath(path, "match"), match)
	}
	before := v.count()
	if key := v.required(value, path, "key", exampleKey); key != nil {
		rule.Key = v.key(fieldPath(path, "key"), key)
	}
	keyOK := v.count() == before
	if missingKey := value.member("missing_key"); missingKey != nil {
		var ruleKey []KeyPart
		if keyOK {
			ruleKey = rule.Key
		}
		rule.MissingKey = v.missingKey(fieldPath(path, "missing_key"), missingKey, ruleKey)
	}
	v.ruleLimits(path, value, &rule)
	if costValue := value.member("cost"); costValue != nil {
		costPath := fieldPath(path, "cost")
		cost, ok := v.cost(costPath, costValue)
		rule.Cost = cost
		if ok {
			v.checkCostFits(costPath, cost, costValue.kind == kindObject, fieldPath(path, "limits"), rule.Limits)
			if rule.LimitsBy != nil {
				v.checkTierCosts(costPath, cost, costValue.kind == kindObject, fieldPath(path, "limits_by"), rule.LimitsBy)
			}
		}
	}
	if shadow := value.member("shadow"); shadow != nil {
		rule.Shadow = v.boolean(fieldPath(path, "shadow"), shadow, shadowRule)
	}
	if global := value.member("global"); global != nil {
		rule.Global = v.global(fieldPath(path, "global"), global)
	}
	v.outcomes(path, value, &rule)
	if usage := value.member("usage"); usage != nil {
		rule.Usage = v.usage(fieldPath(path, "usage"), usage)
	}
	if onLimit := value.member("on_limit"); onLimit != nil {
		onLimitPath := fieldPath(path, "on_limit")
		rule.OnLimit = v.onLimit(onLimitPath, onLimit)
		v.checkDelayFits(onLimitPath, rule.OnLimit, fieldPath(path, "limits"), rule.Limits)
		if rule.LimitsBy != nil {
			for _, tier := range rule.LimitsBy.Tiers {
				v.checkDelayFits(onLimitPath, rule.OnLimit, fieldPath(fieldPath(path, "limits_by.tiers"), tier.Name), tier.Limits)
			}
		}
	}
	if rule.Usage != nil {
		v.checkUsageFits(path, value, &rule)
		rule.Cost = Cost{Units: rule.Usage.Reserve}
	}
	return rule
}

func (v *validator) ruleName(path string, value *jsonValue, index int, ruleIndexByName map[string]int) string {
	name := v.boundedString(path, value, maxRuleNameLength, ruleNameRule)
	if name == "" {
		return ""
	}
	for _, r := range name {
		if !isRuleNameChar(r) {
			v.add(path, strconv.Quote(name)+" contains "+strconv.QuoteRune(r)+", which is not allowed: "+ruleNameRule)
			return ""
		}
	}
	if first, used := ruleIndexByName[name]; used {
		v.add(path, strconv.Quote(name)+" is already used by "+indexPath("rules", first)+": rule names must be unique")
		return name
	}
	ruleIndexByName[name] = index
	return name
}

func isRuleNameChar(r rune) bool {
	return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '.' || r == '_' || r == '-'
}
