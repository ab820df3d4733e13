package coldstart

import (
	"encoding/json"
	"errors"
	"maps"
	"path/filepath"
	"slices"
	"testing"

	"github.com/linegate/linegate/internal/golden"
)

const samTemplate = `
Parameters:
  Level: {Type: String, Default: WARN}
  Required: {Type: String}
Globals:
  Function:
    Timeout: 7
    LoggingConfig: {LogFormat: JSON, ApplicationLogLevel: !Ref Level}
    Environment:
      Variables:
        FROM_GLOBALS: g
        OVERRIDDEN_BY_FUNCTION: g
Resources:
  Table: {Type: AWS::DynamoDB::Table}
  Fn:
    Type: AWS::Serverless::Function
    Properties:
      Handler: bootstrap
      MemorySize: 256
      Environment:
        Variables:
          OVERRIDDEN_BY_FUNCTION: f
          TABLE: !Ref Table
          LEVEL: !Ref Level
          REQUIRED: !Ref Required
          REGION: !Ref AWS::Region
          SUB: !Sub "${Table}-${AWS::AccountId}"
          SUB_ATTR: !Sub "${Table.Arn}"
          GETATT: !GetAtt Table.Arn
          FLAG: true
          NUMBER: 42
          EMPTY: ""
          FROM_SHELL: template
          FROM_PARAMETERS: template
          FROM_FUNCTION_ENTRY: template
  Plain:
    Type: AWS::Serverless::Function
    Properties:
      LoggingConfig: {LogFormat: Text}
`

// TestSAMEnvironment pins how sam local invoke builds a function's
// environment: declared variables only, Globals merged, SAM's symbol table,
// the override priority, and SAM's own variables.
func TestSAMEnvironment(t *testing.T) {
	shell := map[string]string{"FROM_SHELL": "shell", "FROM_PARAMETERS": "shell", "UNDECLARED": "shell", "HOME": "/root"}
	s := SAMInvoke{
		Template:           []byte(samTemplate),
		EnvVars:            []byte(`{"Parameters":{"FROM_PARAMETERS":"parameters","FROM_FUNCTION_ENTRY":"parameters","NOT_DECLARED":"x"},"Fn":{"FROM_FUNCTION_ENTRY":"entry","NUMBER":7}}`),
		ParameterOverrides: map[string]string{"Level": "ERROR"},
		Shell:              func(k string) (string, bool) { v, ok := shell[k]; return v, ok },
	}
	env, err := s.Environment("Fn")
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.MarshalIndent(env, "", "  ")
	golden.Check(t, filepath.Join("testdata", "samenv.golden.json"), append(got, '\n'))
	for k, want := range map[string]string{
		"TABLE": "Table", "LEVEL": "ERROR", "REQUIRED": "", "SUB": "Table-123456789012", "SUB_ATTR": "", "GETATT": "",
		"FLAG": "true", "NUMBER": "7", "FROM_SHELL": "shell", "FROM_PARAMETERS": "parameters", "FROM_FUNCTION_ENTRY": "entry",
		"FROM_GLOBALS": "g", "OVERRIDDEN_BY_FUNCTION": "f", "AWS_LAMBDA_LOG_LEVEL": "ERROR", "AWS_LAMBDA_LOG_FORMAT": "JSON",
		"AWS_LAMBDA_FUNCTION_TIMEOUT": "7", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "256", "AWS_REGION": "us-east-1",
		"AWS_ACCESS_KEY_ID": "defaultkey", "AWS_LAMBDA_FUNCTION_NAME": "Fn", "AWS_LAMBDA_LOG_GROUP_NAME": "aws/lambda/Fn",
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	for _, k := range []string{"UNDECLARED", "HOME", "NOT_DECLARED", "AWS_SESSION_TOKEN"} {
		if _, ok := env[k]; ok {
			t.Errorf("%s reached the function; only declared variables and SAM's own may", k)
		}
	}

	t.Run("profile credentials and text logs", func(t *testing.T) {
		s := SAMInvoke{Template: []byte(samTemplate), Credentials: &Credentials{Region: "ap-northeast-1", AccessKeyID: "AKIA", SecretAccessKey: "s", SessionToken: "tok"}}
		env, err := s.Environment("Plain")
		if err != nil {
			t.Fatal(err)
		}
		if env["AWS_REGION"] != "ap-northeast-1" || env["AWS_DEFAULT_REGION"] != "ap-northeast-1" || env["AWS_ACCESS_KEY_ID"] != "AKIA" || env["AWS_SESSION_TOKEN"] != "tok" {
			t.Errorf("profile not used: %v", env)
		}
		if _, ok := env["AWS_LAMBDA_LOG_FORMAT"]; ok {
			t.Errorf("LogFormat Text set AWS_LAMBDA_LOG_FORMAT: %v", env)
		}
		if env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] != "128" || env["AWS_LAMBDA_FUNCTION_TIMEOUT"] != "7" {
			t.Errorf("defaults: %v", env)
		}
		if n := len(slices.Collect(maps.Keys(env))); n != 16 {
			t.Errorf("%d variables, want SAM's 13, the session token and the 2 from Globals: %v", n, env)
		}
	})
	if _, err := s.Environment("Table"); !errors.Is(err, ErrNoFunction) {
		t.Errorf("Environment(Table) = %v, want ErrNoFunction", err)
	}
}
