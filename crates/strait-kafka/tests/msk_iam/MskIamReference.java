// Test-only: prints what Amazon's aws-msk-iam-auth library sends, so that
// crates/strait-kafka/tests/msk_iam.rs can compare strait's bytes with it.
//
//   java -cp <aws-msk-iam-auth and its dependencies> MskIamReference.java iam <broker host>
//       the AWS_MSK_IAM client's first message (the JSON payload), through the library's own
//       IAMClientCallbackHandler and IAMSaslClient
//   java ... MskIamReference.java oauth
//       the OAUTHBEARER token of IAMOAuthBearerLoginCallbackHandler
//
// Credentials and region come from the environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
// AWS_SESSION_TOKEN, AWS_REGION), through the library's default credential chain; the clock is
// the real one (the library offers no way to fix it), so the test re-signs for the date printed.

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import javax.security.auth.login.AppConfigurationEntry;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule;
import org.apache.kafka.common.security.oauthbearer.OAuthBearerTokenCallback;
import software.amazon.msk.auth.iam.IAMClientCallbackHandler;
import software.amazon.msk.auth.iam.IAMLoginModule;
import software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler;
import software.amazon.msk.auth.iam.internals.AWS4SignedPayloadGenerator;
import software.amazon.msk.auth.iam.internals.IAMSaslClient;

public class MskIamReference {
    public static void main(String[] args) throws Exception {
        String mode = args[0];
        if (mode.equals("iam")) {
            String host = args[1];
            IAMClientCallbackHandler handler = new IAMClientCallbackHandler();
            handler.configure(Map.of(), IAMLoginModule.MECHANISM, List.of(new AppConfigurationEntry(
                    IAMLoginModule.class.getName(),
                    AppConfigurationEntry.LoginModuleControlFlag.REQUIRED, Map.of())));
            IAMSaslClient client = new IAMSaslClient(IAMLoginModule.MECHANISM, handler, host,
                    new AWS4SignedPayloadGenerator());
            byte[] payload = client.evaluateChallenge(new byte[0]);
            System.out.write(payload);
            System.out.flush();
        } else if (mode.equals("oauth")) {
            IAMOAuthBearerLoginCallbackHandler handler = new IAMOAuthBearerLoginCallbackHandler();
            handler.configure(Map.of(), OAuthBearerLoginModule.OAUTHBEARER_MECHANISM,
                    List.of(new AppConfigurationEntry(OAuthBearerLoginModule.class.getName(),
                            AppConfigurationEntry.LoginModuleControlFlag.REQUIRED, Map.of())));
            OAuthBearerTokenCallback callback = new OAuthBearerTokenCallback();
            handler.handle(new javax.security.auth.callback.Callback[] { callback });
            System.out.write(callback.token().value().getBytes(StandardCharsets.UTF_8));
            System.out.flush();
        } else {
            throw new IllegalArgumentException("mode must be iam or oauth");
        }
    }
}
