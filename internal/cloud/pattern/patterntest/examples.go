// Package patterntest holds EventBridge's documented event-pattern examples as
// data, so that the same table checks the pattern package directly and, end
// to end, every cloud the conformance suite runs against (the in-memory one
// and moto_server through the real SDK).
package patterntest

import "fmt"

// Doc pages the rows cite.
const (
	docPatterns = "EventBridge user guide, \"Amazon EventBridge event patterns\""
	docContent  = "EventBridge user guide, \"Content filtering in Amazon EventBridge event patterns\""
	docRuler    = "aws/event-ruler README (the engine behind EventBridge), \"Arrays\""
)

// Example is one documented pattern/event pair and the documented outcome.
type Example struct {
	// Name is unique and safe as a subtest name.
	Name string
	// Doc cites the documentation section the row comes from.
	Doc string
	// Pattern is the event pattern JSON.
	Pattern string
	// Event is the full EventBridge event JSON. Only source, detail-type,
	// resources and detail vary between rows, so the event can be produced
	// by PutEvents in an end-to-end check.
	Event string
	// Want is whether the pattern matches the event.
	Want bool
}

// Invalid is a pattern EventBridge rejects (InvalidEventPatternException).
type Invalid struct {
	Name    string
	Doc     string
	Pattern string
}

// Header fields shared by every example event.
const (
	Account = "123456789012"
	Region  = "us-east-1"
	Time    = "2017-10-02T18:43:48Z"
)

// DefaultSource and DefaultDetailType are the header of events whose rows
// do not vary them.
const (
	DefaultSource     = "example.ec2"
	DefaultDetailType = "EC2 Instance State-change Notification"
)

// event builds a full EventBridge event around detail.
func event(source, detailType, resources, detail string) string {
	return fmt.Sprintf(`{"version":"0","id":"6a7e8feb-b491-4cf7-a9f1-bf3703467718","detail-type":%q,"source":%q,"account":%q,"time":%q,"region":%q,"resources":%s,"detail":%s}`,
		detailType, source, Account, Time, Region, resources, detail)
}

func ev(detail string) string {
	return event(DefaultSource, DefaultDetailType, `["arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0"]`, detail)
}

// Examples is the table. Every row is a documented example or a direct
// consequence of a documented rule.
var Examples = []Example{
	// Amazon EventBridge event patterns
	{"exact_source", docPatterns + ": matching on source", `{"source":["example.ec2"]}`, ev(`{"state":"running"}`), true},
	{"exact_source_mismatch", docPatterns + ": matching on source", `{"source":["example.s3"]}`, ev(`{"state":"running"}`), false},
	{"and_of_fields", docPatterns + ": all fields must match", `{"source":["example.ec2"],"detail-type":["EC2 Instance State-change Notification"],"detail":{"state":["running"]}}`, ev(`{"state":"running"}`), true},
	{"and_of_fields_one_fails", docPatterns + ": all fields must match", `{"source":["example.ec2"],"detail-type":["EC2 Instance State-change Notification"],"detail":{"state":["running"]}}`, ev(`{"state":"stopped"}`), false},
	{"or_of_values", docPatterns + ": values in an array are ORed", `{"detail":{"state":["pending","running"]}}`, ev(`{"state":"pending"}`), true},
	{"case_sensitive", docPatterns + ": matching is exact, character by character", `{"detail":{"state":["Running"]}}`, ev(`{"state":"running"}`), false},
	{"missing_field", docPatterns + ": a field in the pattern must be in the event", `{"detail":{"instance-id":["i-1"]}}`, ev(`{"state":"running"}`), false},
	{"array_intersection", docPatterns + ": matching values in arrays", `{"resources":["arn:aws:ec2:us-east-1:123456789012:instance/i-b188560f","arn:aws:ec2:us-east-1:123456789012:instance/i-1234567890abcdef0"]}`, ev(`{"state":"running"}`), true},
	{"array_no_intersection", docPatterns + ": matching values in arrays", `{"resources":["arn:aws:ec2:us-east-1:111122223333:instance/i-b188560f"]}`, ev(`{"state":"running"}`), false},
	{"array_in_detail", docPatterns + ": matching values in arrays", `{"detail":{"tags":["prod"]}}`, ev(`{"tags":["dev","prod"]}`), true},
	{"nested_object", docPatterns + ": patterns have the structure of the events they match", `{"detail":{"instance":{"state":{"name":["running"]}}}}`, ev(`{"instance":{"state":{"name":"running","code":16}}}`), true},
	{"number_exact", docPatterns + ": numbers match numbers", `{"detail":{"c-count":[5]}}`, ev(`{"c-count":5}`), true},
	{"number_not_string", docPatterns + ": a number does not match a string", `{"detail":{"c-count":[5]}}`, ev(`{"c-count":"5"}`), false},
	{"boolean_exact", docPatterns + ": JSON booleans", `{"detail":{"enabled":[true]}}`, ev(`{"enabled":true}`), true},
	{"boolean_not_string", docPatterns + ": JSON booleans", `{"detail":{"enabled":[true]}}`, ev(`{"enabled":"true"}`), false},
	{"empty_value", docContent + ": empty value matching", `{"detail":{"LastName":[""]}}`, ev(`{"FirstName":"John","LastName":""}`), true},
	{"empty_value_nonempty", docContent + ": empty value matching", `{"detail":{"LastName":[""]}}`, ev(`{"FirstName":"John","LastName":"Doe"}`), false},
	{"null_value", docContent + ": null value matching", `{"detail":{"UserID":[null]}}`, ev(`{"UserID":null}`), true},
	{"null_value_absent", docContent + ": null value matching (null is not absence)", `{"detail":{"UserID":[null]}}`, ev(`{"state":"running"}`), false},

	// Content filtering: prefix and suffix
	{"prefix", docContent + ": prefix matching", `{"detail":{"region":[{"prefix":"us-"}]}}`, ev(`{"region":"us-west-2"}`), true},
	{"prefix_mismatch", docContent + ": prefix matching", `{"detail":{"region":[{"prefix":"us-"}]}}`, ev(`{"region":"eu-west-1"}`), false},
	{"prefix_ignore_case", docContent + ": prefix matching while ignoring case", `{"detail":{"service":[{"prefix":{"equals-ignore-case":"EventB"}}]}}`, ev(`{"service":"eventbridge"}`), true},
	{"prefix_ignore_case_mismatch", docContent + ": prefix matching while ignoring case", `{"detail":{"service":[{"prefix":{"equals-ignore-case":"EventB"}}]}}`, ev(`{"service":"sqs"}`), false},
	{"suffix", docContent + ": suffix matching", `{"detail":{"FileName":[{"suffix":".png"}]}}`, ev(`{"FileName":"image.png"}`), true},
	{"suffix_mismatch", docContent + ": suffix matching", `{"detail":{"FileName":[{"suffix":".png"}]}}`, ev(`{"FileName":"image.jpg"}`), false},
	{"suffix_ignore_case", docContent + ": suffix matching while ignoring case", `{"detail":{"FileName":[{"suffix":{"equals-ignore-case":".png"}}]}}`, ev(`{"FileName":"IMAGE.PNG"}`), true},

	// Content filtering: anything-but
	{"anything_but_string", docContent + ": anything-but matching", `{"detail":{"state":[{"anything-but":"initializing"}]}}`, ev(`{"state":"running"}`), true},
	{"anything_but_string_excluded", docContent + ": anything-but matching", `{"detail":{"state":[{"anything-but":"initializing"}]}}`, ev(`{"state":"initializing"}`), false},
	{"anything_but_number", docContent + ": anything-but matching", `{"detail":{"x-limit":[{"anything-but":123}]}}`, ev(`{"x-limit":456}`), true},
	{"anything_but_number_excluded", docContent + ": anything-but matching", `{"detail":{"x-limit":[{"anything-but":123}]}}`, ev(`{"x-limit":123}`), false},
	{"anything_but_list", docContent + ": anything-but matching (list)", `{"detail":{"state":[{"anything-but":["stopped","overloaded"]}]}}`, ev(`{"state":"running"}`), true},
	{"anything_but_list_excluded", docContent + ": anything-but matching (list)", `{"detail":{"state":[{"anything-but":["stopped","overloaded"]}]}}`, ev(`{"state":"stopped"}`), false},
	{"anything_but_absent", docContent + ": anything-but matches values, so an absent field does not match", `{"detail":{"state":[{"anything-but":"initializing"}]}}`, ev(`{"other":"x"}`), false},
	{"anything_but_prefix", docContent + ": anything-but matching on prefixes", `{"detail":{"state":[{"anything-but":{"prefix":"init"}}]}}`, ev(`{"state":"running"}`), true},
	{"anything_but_prefix_excluded", docContent + ": anything-but matching on prefixes", `{"detail":{"state":[{"anything-but":{"prefix":"init"}}]}}`, ev(`{"state":"initializing"}`), false},
	{"anything_but_suffix_excluded", docContent + ": anything-but matching on suffixes", `{"detail":{"FileName":[{"anything-but":{"suffix":".txt"}}]}}`, ev(`{"FileName":"notes.txt"}`), false},
	{"anything_but_suffix", docContent + ": anything-but matching on suffixes", `{"detail":{"FileName":[{"anything-but":{"suffix":".txt"}}]}}`, ev(`{"FileName":"photo.png"}`), true},
	{"anything_but_ignore_case_excluded", docContent + ": anything-but matching while ignoring case", `{"detail":{"state":[{"anything-but":{"equals-ignore-case":["Stopped","OverLoaded"]}}]}}`, ev(`{"state":"STOPPED"}`), false},
	{"anything_but_ignore_case", docContent + ": anything-but matching while ignoring case", `{"detail":{"state":[{"anything-but":{"equals-ignore-case":["Stopped","OverLoaded"]}}]}}`, ev(`{"state":"running"}`), true},
	{"anything_but_wildcard_excluded", docContent + ": anything-but matching using wildcards", `{"detail":{"FilePath":[{"anything-but":{"wildcard":"*/lib/*"}}]}}`, ev(`{"FilePath":"/usr/lib/libc.so"}`), false},
	{"anything_but_wildcard", docContent + ": anything-but matching using wildcards", `{"detail":{"FilePath":[{"anything-but":{"wildcard":"*/lib/*"}}]}}`, ev(`{"FilePath":"/usr/bin/sh"}`), true},

	// Content filtering: numeric, IP, exists, equals-ignore-case, wildcard
	{"numeric_range_in", docContent + ": numeric matching", `{"detail":{"c-count":[{"numeric":[">",0,"<=",5]}]}}`, ev(`{"c-count":5}`), true},
	{"numeric_range_low", docContent + ": numeric matching", `{"detail":{"c-count":[{"numeric":[">",0,"<=",5]}]}}`, ev(`{"c-count":0}`), false},
	{"numeric_range_high", docContent + ": numeric matching", `{"detail":{"c-count":[{"numeric":[">",0,"<=",5]}]}}`, ev(`{"c-count":5.5}`), false},
	{"numeric_equals", docContent + ": numeric matching", `{"detail":{"x-limit":[{"numeric":["=",3.018e2]}]}}`, ev(`{"x-limit":301.8}`), true},
	{"numeric_string_value", docContent + ": numeric matching only works on JSON numbers", `{"detail":{"c-count":[{"numeric":[">",0]}]}}`, ev(`{"c-count":"3"}`), false},
	{"cidr_in", docContent + ": IP address matching", `{"detail":{"sourceIPAddress":[{"cidr":"10.0.0.0/24"}]}}`, ev(`{"sourceIPAddress":"10.0.0.255"}`), true},
	{"cidr_out", docContent + ": IP address matching", `{"detail":{"sourceIPAddress":[{"cidr":"10.0.0.0/24"}]}}`, ev(`{"sourceIPAddress":"10.0.1.1"}`), false},
	{"exists_true", docContent + ": exists matching", `{"detail":{"state":[{"exists":true}]}}`, ev(`{"state":"running"}`), true},
	{"exists_true_absent", docContent + ": exists matching", `{"detail":{"state":[{"exists":true}]}}`, ev(`{"other":"x"}`), false},
	{"exists_false", docContent + ": exists matching", `{"detail":{"c-count":[{"exists":false}]}}`, ev(`{"state":"running"}`), true},
	{"exists_false_present", docContent + ": exists matching", `{"detail":{"c-count":[{"exists":false}]}}`, ev(`{"c-count":1}`), false},
	{"exists_leaf_only", docContent + ": exists matching only works on leaf nodes", `{"detail":{"c-count":[{"exists":true}]}}`, ev(`{"c-count":{"x":1}}`), false},
	{"equals_ignore_case", docContent + ": equals-ignore-case matching", `{"detail-type":[{"equals-ignore-case":"ec2 instance state-change notification"}]}`, ev(`{"state":"running"}`), true},
	{"equals_ignore_case_mismatch", docContent + ": equals-ignore-case matching", `{"detail":{"name":[{"equals-ignore-case":"alice"}]}}`, ev(`{"name":"alicia"}`), false},
	{"wildcard", docContent + ": matching using wildcards", `{"detail":{"EventBusArn":[{"wildcard":"arn:aws:events:us-east-1:*:event-bus/*"}]}}`, ev(`{"EventBusArn":"arn:aws:events:us-east-1:123456789012:event-bus/orders"}`), true},
	{"wildcard_mismatch", docContent + ": matching using wildcards", `{"detail":{"EventBusArn":[{"wildcard":"arn:aws:events:us-east-1:*:event-bus/*"}]}}`, ev(`{"EventBusArn":"arn:aws:events:eu-west-1:123456789012:event-bus/orders"}`), false},
	{"wildcard_escaped_star", docContent + ": matching using wildcards (\\* is a literal star)", `{"detail":{"name":[{"wildcard":"a\\*b"}]}}`, ev(`{"name":"a*b"}`), true},
	{"wildcard_escaped_star_mismatch", docContent + ": matching using wildcards (\\* is a literal star)", `{"detail":{"name":[{"wildcard":"a\\*b"}]}}`, ev(`{"name":"axb"}`), false},

	// $or
	{"or_first_branch", docContent + ": complex example with $or matching", `{"detail":{"$or":[{"c-count":[{"numeric":[">",0,"<=",5]}]},{"d-count":[{"numeric":["<",10]}]},{"x-limit":[{"numeric":["=",3.018e2]}]}]}}`, ev(`{"c-count":3,"d-count":20}`), true},
	{"or_last_branch", docContent + ": complex example with $or matching", `{"detail":{"$or":[{"c-count":[{"numeric":[">",0,"<=",5]}]},{"d-count":[{"numeric":["<",10]}]},{"x-limit":[{"numeric":["=",3.018e2]}]}]}}`, ev(`{"c-count":10,"x-limit":301.8}`), true},
	{"or_no_branch", docContent + ": complex example with $or matching", `{"detail":{"$or":[{"c-count":[{"numeric":[">",0,"<=",5]}]},{"d-count":[{"numeric":["<",10]}]},{"x-limit":[{"numeric":["=",3.018e2]}]}]}}`, ev(`{"c-count":10,"d-count":20,"x-limit":5}`), false},
	{"or_top_level", docContent + ": $or at the top level", `{"$or":[{"source":["example.s3"]},{"detail-type":["EC2 Instance State-change Notification"]}]}`, ev(`{"state":"running"}`), true},
	{"complex_multiple", docContent + ": complex example with multiple matching", `{"detail":{"location":[{"prefix":"us-"}],"c-count":[{"numeric":[">",0]}],"state":[{"anything-but":["stopped"]}]}}`, ev(`{"location":"us-east","c-count":2,"state":"running"}`), true},

	// Arrays of objects are flattened: each leaf keeps its path.
	{"array_of_objects", docRuler, `{"detail":{"items":{"sku":["B"]}}}`, ev(`{"items":[{"sku":"A"},{"sku":"B"}]}`), true},

	// linegate's own rules on linegate-shaped events.
	{"linegate_interactive_message", "linegate template.yaml rule \"interactive\"", `{"detail-type":["message","postback"]}`, event("line.webhook", "message", `[]`, `{"destination":"U1","receivedAt":"2024-01-01T00:00:00Z","event":{"type":"message"}}`), true},
	{"linegate_interactive_follow", "linegate template.yaml rule \"interactive\"", `{"detail-type":["message","postback"]}`, event("line.webhook", "follow", `[]`, `{"destination":"U1","receivedAt":"2024-01-01T00:00:00Z","event":{"type":"follow"}}`), false},
	{"linegate_background_follow", "linegate template.yaml rule \"background\"", `{"detail-type":[{"anything-but":["message","postback"]}]}`, event("line.webhook", "follow", `[]`, `{"destination":"U1","receivedAt":"2024-01-01T00:00:00Z","event":{"type":"follow"}}`), true},
	{"linegate_background_postback", "linegate template.yaml rule \"background\"", `{"detail-type":[{"anything-but":["message","postback"]}]}`, event("line.webhook", "postback", `[]`, `{"destination":"U1","receivedAt":"2024-01-01T00:00:00Z","event":{"type":"postback"}}`), false},
	{"linegate_group_source", docPatterns + ": nested fields in detail", `{"source":["line.webhook"],"detail":{"event":{"source":{"type":["group"]}}}}`, event("line.webhook", "message", `[]`, `{"destination":"U1","event":{"type":"message","source":{"type":"group","groupId":"C1"}}}`), true},
}

// InvalidPatterns are patterns EventBridge rejects.
var InvalidPatterns = []Invalid{
	{"not_json", docPatterns, `{"source":`},
	{"not_object", docPatterns + ": a pattern is a JSON object", `["example.ec2"]`},
	{"empty_pattern", docPatterns + ": a pattern must name at least one field", `{}`},
	{"leaf_not_array", docPatterns + ": match values are always in arrays", `{"source":"example.ec2"}`},
	{"empty_array", docPatterns + ": match values are always in (non-empty) arrays", `{"source":[]}`},
	{"unknown_operator", docContent + ": the filter operators", `{"detail":{"state":[{"contains":"run"}]}}`},
	{"numeric_bad_operator", docContent + ": numeric matching", `{"detail":{"c-count":[{"numeric":["!=",5]}]}}`},
	{"numeric_not_number", docContent + ": numeric matching", `{"detail":{"c-count":[{"numeric":[">","5"]}]}}`},
	{"numeric_odd_length", docContent + ": numeric matching", `{"detail":{"c-count":[{"numeric":[">",0,"<="]}]}}`},
	{"numeric_two_lower_bounds", docContent + ": numeric matching", `{"detail":{"c-count":[{"numeric":[">",0,">",5]}]}}`},
	{"exists_not_boolean", docContent + ": exists matching", `{"detail":{"state":[{"exists":"yes"}]}}`},
	{"prefix_not_string", docContent + ": prefix matching", `{"detail":{"state":[{"prefix":5}]}}`},
	{"cidr_bad", docContent + ": IP address matching", `{"detail":{"ip":[{"cidr":"10.0.0.0/99"}]}}`},
	{"wildcard_consecutive", docContent + ": matching using wildcards (consecutive wildcards are rejected)", `{"detail":{"name":[{"wildcard":"a**b"}]}}`},
	{"anything_but_mixed_list", docContent + ": anything-but takes only strings or only numbers", `{"detail":{"state":[{"anything-but":["a",1]}]}}`},
}
