package io.streamsdsl.jvm;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.SparkSessionExtensions;
import org.apache.spark.sql.catalyst.FunctionIdentifier;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.ExpressionInfo;
import org.apache.spark.sql.catalyst.expressions.Literal;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.UnresolvedHint;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.types.DataTypes;
import scala.Function1;
import scala.PartialFunction;
import scala.Tuple3;
import scala.runtime.AbstractPartialFunction;
import scala.runtime.BoxedUnit;

/**
 * The JVM operator for sessions without py4j (Spark Connect): a Spark SQL extension
 * ({@code spark.sql.extensions=io.streamsdsl.jvm.StreamsDslExtensions}, with this jar on the server's
 * class path).
 *
 * <ul>
 *   <li>A hint resolution rule replaces {@code df.hint("streamsdsl_operator", specJson, outputSchemaJson)}
 *   (an {@code UnresolvedHint}, which travels in a Connect plan as any hint does) by the plan
 *   {@link AggregateOperator#apply} (a spec with a {@code join}: {@link JoinOperator#apply}) builds on the
 *   hinted input: the same operator a classic session applies through py4j.</li>
 *   <li>The SQL function {@code streamsdsl_jvm_protocol()} returns the jar's contract version, which
 *   the Python side compares with its own before it sends a hint.</li>
 * </ul>
 */
public final class StreamsDslExtensions implements Function1<SparkSessionExtensions, BoxedUnit> {
    /** The hint's name (`streamsdsl.compiler.jvm_operator.OPERATOR_HINT`). */
    public static final String HINT = "streamsdsl_operator";
    /** The SQL function returning {@link AggregateOperator#PROTOCOL}. */
    public static final String PROTOCOL_FUNCTION = "streamsdsl_jvm_protocol";

    @Override
    public BoxedUnit apply(SparkSessionExtensions extensions) {
        extensions.injectHintResolutionRule(OperatorHint::new);
        Function1<scala.collection.immutable.Seq<Expression>, Expression> protocol = args -> {
            if (!args.isEmpty()) {
                throw new IllegalArgumentException(PROTOCOL_FUNCTION + "() takes no arguments");
            }
            return Literal.create(AggregateOperator.PROTOCOL, DataTypes.IntegerType);
        };
        extensions.injectFunction(new Tuple3<>(FunctionIdentifier.apply(PROTOCOL_FUNCTION),
            new ExpressionInfo(StreamsDslExtensions.class.getName(), PROTOCOL_FUNCTION), protocol));
        return BoxedUnit.UNIT;
    }

    /** Replaces each {@code streamsdsl_operator} hint by the JVM operator over the hinted plan. */
    static final class OperatorHint extends Rule<LogicalPlan> {
        private final SparkSession session;

        OperatorHint(SparkSession session) {
            this.session = session;
        }

        @Override
        public LogicalPlan apply(LogicalPlan plan) {
            PartialFunction<LogicalPlan, LogicalPlan> replace = new AbstractPartialFunction<>() {
                @Override
                public boolean isDefinedAt(LogicalPlan p) {
                    return p instanceof UnresolvedHint && HINT.equalsIgnoreCase(((UnresolvedHint) p).name());
                }

                @Override
                public <A1 extends LogicalPlan, B1> B1 applyOrElse(A1 p, Function1<A1, B1> otherwise) {
                    if (!isDefinedAt(p)) {
                        return otherwise.apply(p);
                    }
                    @SuppressWarnings("unchecked")
                    B1 out = (B1) operator((UnresolvedHint) p);
                    return out;
                }
            };
            return plan.resolveOperatorsUp(replace);
        }

        private LogicalPlan operator(UnresolvedHint hint) {
            scala.collection.immutable.Seq<Expression> parameters = hint.parameters();
            if (parameters.size() != 2) {
                throw new IllegalArgumentException(HINT + " takes two parameters (the spec JSON and the output schema "
                    + "JSON), got " + parameters.size());
            }
            String spec = text(parameters.apply(0));
            String schema = text(parameters.apply(1));
            Dataset<Row> input = org.apache.spark.sql.classic.Dataset.ofRows(
                (org.apache.spark.sql.classic.SparkSession) session, hint.child());
            try {
                boolean join = new com.fasterxml.jackson.databind.ObjectMapper().readTree(spec).has("join");
                Dataset<Row> operator = join ? JoinOperator.apply(input, spec, schema) : AggregateOperator.apply(input, spec, schema);
                return ((org.apache.spark.sql.classic.Dataset<Row>) operator).logicalPlan();
            } catch (RuntimeException e) {
                throw e;
            } catch (Exception e) {
                throw new IllegalArgumentException(HINT + ": " + e.getMessage(), e);
            }
        }

        private static String text(Expression parameter) {
            if (!parameter.foldable()) {
                throw new IllegalArgumentException(HINT + "'s parameters are string literals, got " + parameter);
            }
            Object value = parameter.eval(null);
            if (value == null) {
                throw new IllegalArgumentException(HINT + "'s parameters are string literals, got null");
            }
            return value.toString();
        }
    }
}
